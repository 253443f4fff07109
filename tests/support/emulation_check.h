// Test support: one emulation check of an emitted graph. Emits the graph, checks the text the
// source must and must not contain, compiles it on the CPU emulator (support/emulation.h), runs
// it with the threads of every block in order and reversed (and, for a source that packs
// outputs, with the outputs each alone and packed), and compares every output with the float64
// interpreter (run_reference) of the graph or of a program it computes. Every failure names the
// case.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "support/emulation.h"

namespace strata::testing {

/// What one emulation check emits and how close its outputs must be.
struct EmulationCheck {
  std::string name;                   ///< the case: the emulation's folder tag, in every message
  EmitOptions options{};              ///< plan options, knobs and arch of the emitted source
  std::vector<std::string> expect{};  ///< text the emitted source must contain (the path taken)
  std::vector<std::string> absent{};  ///< text it must not contain
  /// A failure on `expect` quotes the source's lines that contain this word (e.g. "wgmma": the
  /// plan's notes on it); empty: none.
  std::string notes_word{};
  /// The program whose interpretation the outputs must match; null: the graph itself.
  const KernelGraph* reference = nullptr;
  /// With `reference`: the graph's own interpretation must match the reference's within a
  /// relative L2 error of 1e-9 as well (a check of the test itself).
  bool graph_matches_reference = false;
  unsigned seed = 1234;  ///< of the random inputs
  double amp = 0.5;      ///< inputs uniform in [-amp, amp], rounded to their dtypes
  /// Every element of every output within rtol·(|ref| + rms(ref)) of the reference (NaN fails);
  /// 0: elements not checked one by one.
  double rtol = 2e-2;
  /// Every output's ‖out − ref‖₂ / ‖ref‖₂ below this; 0: not checked.
  double rel_l2 = 1e-2;
};

/// Runs the check of `g` described by `c` (GoogleTest failures on any miss) and returns the
/// emitted source ("" when emitting or compiling failed).
inline std::string check_emulation(const KernelGraph& g, const EmulationCheck& c) {
  EmulatedGraph emu(g, c.options, c.name);
  if (!emu.ok()) {
    ADD_FAILURE() << c.name << ": " << emu.log();
    return emu.source();
  }
  const std::string& src = emu.source();
  std::string notes;
  if (!c.notes_word.empty())
    for (size_t at = src.find(c.notes_word); at != std::string::npos && notes.size() <= 4000;
         at = src.find(c.notes_word, src.find('\n', at))) {
      const size_t begin = src.rfind('\n', at) + 1;
      notes += src.substr(begin, src.find('\n', at) - begin) + "\n";
    }
  for (const std::string& text : c.expect)
    EXPECT_NE(src.find(text), std::string::npos)
        << c.name << ": no `" << text << "`" << (notes.empty() ? "" : " in\n") << notes;
  for (const std::string& text : c.absent)
    EXPECT_EQ(src.find(text), std::string::npos) << c.name << ": `" << text << "`";

  const std::vector<HostTensor> inputs = rounded_random_inputs(g, c.seed, c.amp);
  auto reference = run_reference(c.reference ? *c.reference : g, inputs);
  if (!reference.ok()) {
    ADD_FAILURE() << c.name << ": reference: " << reference.error().message;
    return src;
  }
  const std::vector<HostTensor>& ref = *reference;
  if (c.reference && c.graph_matches_reference) {
    auto own = run_reference(g, inputs);
    if (!own.ok()) {
      ADD_FAILURE() << c.name << ": the graph's reference: " << own.error().message;
      return src;
    }
    EXPECT_EQ(own->size(), ref.size()) << c.name;
    for (size_t i = 0; i < std::min(own->size(), ref.size()); ++i)
      EXPECT_LT(compare((*own)[i], ref[i], 1e-9).rel_l2, 1e-9)
          << c.name << ": the graph and the reference program differ at output " << i;
  }
  std::vector<std::pair<bool, bool>> runs = {{false, false}, {true, false}};  // reverse, packed
  if (emu.packs()) runs.insert(runs.end(), {{false, true}, {true, true}});
  for (auto [reverse, packed] : runs) {
    const std::string order = std::string(reverse ? " (threads in reverse)" : "") +
                              (packed ? " (outputs packed)" : "");
    std::vector<HostTensor> out;
    if (!emu.run(inputs, out, reverse, packed)) {
      ADD_FAILURE() << c.name << order << ": " << emu.log();
      return src;
    }
    if (out.size() != ref.size()) {
      ADD_FAILURE() << c.name << ": " << out.size() << " outputs, the reference has " << ref.size();
      return src;
    }
    for (size_t i = 0; i < ref.size(); ++i) {
      // (compare's rtol only counts `bad`, which rtol = 0 leaves unchecked.)
      const Comparison cmp = compare(out[i], ref[i], c.rtol > 0 ? c.rtol : 2e-2);
      if (c.rtol > 0)
        EXPECT_EQ(cmp.bad, 0) << c.name << " output " << i << order << ": " << cmp.bad << " of "
                              << ref[i].data.size() << " elements off, rel L2 " << cmp.rel_l2
                              << ", max abs " << cmp.max_abs << ", ref rms " << cmp.ref_rms;
      if (c.rel_l2 > 0)
        EXPECT_LT(cmp.rel_l2, c.rel_l2)
            << c.name << " output " << i << order << ": max abs " << cmp.max_abs;
    }
  }
  return src;
}

}  // namespace strata::testing
