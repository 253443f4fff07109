// Making arbitrary bytes safe for JSON text and terminals.
#pragma once

#include <string>
#include <string_view>

namespace strata {

/// `s` with every byte that is not part of a well-formed UTF-8 sequence (RFC 3629: no
/// overlong forms, surrogates or code points above U+10FFFF) written as the four characters
/// `\xNN`. Valid text is returned unchanged.
std::string printable_utf8(std::string_view s);

}  // namespace strata
