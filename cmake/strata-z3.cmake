# Defines the imported target z3::libz3 (strata_core links it) if it does not exist yet: from
# Z3's own CMake package when one is installed, else from the header and library found on the
# system (Debian's libz3-dev ships no CMake package; Z3_INCLUDE_DIR and Z3_LIBRARY may be set to
# point at them). Leaves the target undefined when Z3 is not found; the caller reports that.
# Used by strata's build and by the installed package (strata-config.cmake).
if(NOT TARGET z3::libz3)
  find_package(Z3 QUIET CONFIG)
endif()
if(NOT TARGET z3::libz3)
  find_path(Z3_INCLUDE_DIR z3++.h)
  find_library(Z3_LIBRARY z3)
  if(Z3_INCLUDE_DIR AND Z3_LIBRARY)
    add_library(z3::libz3 UNKNOWN IMPORTED)
    set_target_properties(z3::libz3 PROPERTIES IMPORTED_LOCATION "${Z3_LIBRARY}"
                                               INTERFACE_INCLUDE_DIRECTORIES "${Z3_INCLUDE_DIR}")
  endif()
endif()
