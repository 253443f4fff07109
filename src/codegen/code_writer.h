// Internal helpers of the CUDA emitter: the builder of its statement IR (cuda_ir.h) and the C++
// spelling of types, identifiers and index arithmetic.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "cuda_ir.h"
#include "cuda_printer.h"
#include "strata/ir/op.h"
#include "strata/ir/shape.h"

namespace strata::codegen {

/// Builds a statement tree of the kernel IR (cuda_ir.h): statements are appended to the
/// innermost open block; `open` enters the body of a for-loop, an if or a scope and `close`
/// leaves it. The text exists only when print_cuda prints the tree (str()).
class CodeWriter {
 public:
  CodeWriter() : root_(ir::seq()) { open_.push_back(root_.get()); }
  /// Appends a statement to the current block.
  void add(ir::Stmt s);
  /// Appends `s` (a for-loop, an if or a scope) and enters its body.
  void open(ir::Stmt s);
  /// Appends a scope `header { … }` and enters it ("" gives a plain block).
  void open(const std::string& header) { open(ir::scope(header)); }
  /// Leaves the current body; `suffix` follows the closing brace of a scope.
  void close(const std::string& suffix = "");
  /// Shorthands: `// text`; a verbatim line (pragmas, aliases, preprocessor lines; "" is an
  /// empty line); several verbatim lines.
  void comment(const std::string& text) { add(ir::comment(text)); }
  void line(const std::string& text) { add(ir::verbatim_stmt(text)); }
  void raw(const std::string& text);
  /// `__syncthreads();`
  void sync() { add(ir::sync_threads()); }
  /// `callee(args…);`
  void call(const std::string& callee, std::vector<ir::Expr> args = {},
            const std::string& comment = "") {
    add(ir::eval(ir::call(callee, std::move(args)), comment));
  }
  const ir::Stmt& root() const { return root_; }
  std::string str() const { return ir::print_cuda(root_); }

 private:
  ir::Stmt root_;
  std::vector<ir::StmtNode*> open_;
};

/// The CUDA element type of a dtype: "__half", "__nv_bfloat16" or "float".
std::string cuda_type(DType t);
/// A C identifier made from `name` (other characters become '_'), prefixed to be unique.
std::string identifier(const std::string& prefix, const std::string& name);
/// Decimal literal of an integer.
std::string lit(int64_t v);
/// An f32 literal that round-trips `v` ("0.125f", "-3.0f", "1e-05f").
std::string float_lit(double v);

/// `e`, parenthesized unless it is a single identifier or literal.
std::string paren(const std::string& e);
/// `a * b` folded when either is a literal 0 or 1.
std::string mul(const std::string& a, int64_t b);
/// `a + b + …` of the non-"0" terms, "0" when all are.
std::string sum(const std::vector<std::string>& terms);

/// Index expressions of the dims of `shape` for a flat row-major element index `flat`; size-1
/// dims give 0.
std::vector<ir::Expr> unflatten(const ir::Expr& flat, const Shape& shape);
/// The memory offset Σ_d index_d · strides[d] of the element with flat row-major index `flat`
/// (≥ 0) of an index space of extents `shape` (strides[d] = 0: dim d broadcast, not addressed).
/// Runs of dims that are contiguous in memory (strides[d] = strides[d + 1] · shape[d + 1], or
/// both 0) are addressed as one dim, so a contiguous space is addressed by `flat` itself and a
/// broadcast run costs nothing: [32, 64] with strides {64, 1} gives `flat`, with {0, 1}
/// `flat % 64`.
ir::Expr linear_offset(const ir::Expr& flat, const Shape& shape,
                       const std::vector<int64_t>& strides);
/// Indices into an operand of shape `operand` broadcast (NumPy rules) to a result with
/// indices `out_idx`.
std::vector<ir::Expr> broadcast_index(const Shape& operand, const std::vector<ir::Expr>& out_idx);
/// The printed form of each expression (for helpers that still take text).
std::vector<std::string> texts(const std::vector<ir::Expr>& e);
/// Verbatim expressions of index texts.
std::vector<ir::Expr> exprs(const std::vector<std::string>& t);

/// Indices into an operand of shape `operand` broadcast (NumPy rules) to a result with
/// indices `out_idx`.
std::vector<std::string> broadcast_index(const Shape& operand,
                                         const std::vector<std::string>& out_idx);

/// The f32 expression of an elementwise op (unary: args[0]; binary: args[0], args[1]) through
/// the runtime's math functions — the one place that spells out each op's arithmetic.
std::string scalar_op_expr(OpKind kind, const std::vector<std::string>& args, const OpAttrs& attrs);

}  // namespace strata::codegen
