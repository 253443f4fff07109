// The .strata program parser (the format is documented in docs/program-format.md).
//
// A program is a sequence of line statements: `input NAME: DTYPE[dims]`, `NAME = op(args)`
// with nested calls allowed, and `output NAME, ...`. The parser builds a kernel graph of
// predefined ops only, through KernelGraph's checking constructors, so every shape rule of
// docs/mugraph-semantics.md §2.1 is enforced there and reported at the call that broke it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "strata/ir/kernel_graph.h"
#include "strata/util/status.h"

namespace strata {

/// Parses a .strata program. `filename` is used only in messages.
///
/// On success the graph's inputs are the `input` statements in order (named), each
/// assignment's outermost call produces the named tensor, nested calls produce unnamed
/// intermediate tensors, and the outputs are the `output` statements' names in order.
/// Dims are stored normalized. On failure the one Error has the form
/// `file:line:col: error: <what was found>; expected <what>` with the column of the
/// offending token. Never aborts on any input.
Result<KernelGraph> parse_program(std::string_view text, const std::string& filename);

/// One parameter of a program op's call signature (docs/program-format.md, "Ops").
struct ProgramParam {
  enum class Kind { Tensor, Int, Real };
  std::string name;
  Kind kind = Kind::Tensor;
  bool required = true;
  double default_value = 0;  ///< when not required
  std::string alias;         ///< a second accepted keyword, or ""
};

/// True for the ops a program may call: kernel-level predefined ops of the op table.
bool is_program_op(OpKind kind);
/// The call signature the parser binds arguments to, in positional order; empty for ops a
/// program cannot call. Front ends (the Python bindings) read it instead of keeping a copy.
std::vector<ProgramParam> program_op_signature(OpKind kind);
/// "sum(x, dim, to=1)".
std::string program_op_signature_text(OpKind kind);

/// The composite ops a program may call besides the table's (softmax, layer_norm: the parser
/// expands them into table ops; docs/program-format.md), in a fixed order.
std::vector<std::string> program_composite_names();
/// The call signature of a composite op (empty for an unknown name), and its text.
std::vector<ProgramParam> program_composite_signature(std::string_view name);
std::string program_composite_signature_text(std::string_view name);

}  // namespace strata
