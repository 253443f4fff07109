// Internal: the statement / expression IR the CUDA emitter builds kernels in (docs/codegen.md,
// "The kernel IR"), printed once by print_cuda (cuda_printer.h).
//
// Expressions are immutable trees shared by pointer: variables, integer and f32 literals, unary
// and binary operators, calls (the callee spelled with its template arguments), indexing, casts
// and the conditional operator. The arithmetic builders fold constants and identities (x + 0,
// x · 1, x · 0, literal op literal), so index arithmetic written in full prints tidily.
// Statements: declarations, assignments, expression statements, for-loops, ifs, scopes (a braced
// block with a header: a function, a struct, a plain block), comments, and a verbatim line for
// the few constructs the IR does not model (pragmas, `using` aliases).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace strata::codegen::ir {

struct ExprNode;

/// A shared, immutable expression (null when default-constructed).
class Expr {
 public:
  Expr() = default;
  Expr(int64_t v);                                // NOLINT: integer literals convert implicitly
  Expr(int v) : Expr(static_cast<int64_t>(v)) {}  // NOLINT
  explicit Expr(std::shared_ptr<const ExprNode> n) : n_(std::move(n)) {}
  const ExprNode* get() const { return n_.get(); }
  const ExprNode* operator->() const { return n_.get(); }
  explicit operator bool() const { return n_ != nullptr; }
  /// Whether this is the integer literal `v`.
  bool is(int64_t v) const;
  /// Whether this is an integer literal (its value in *v).
  bool is_int(int64_t* v = nullptr) const;

 private:
  std::shared_ptr<const ExprNode> n_;
};

enum class ExprKind : uint8_t {
  Var,       ///< a name (variable, parameter, constant): `name`
  Int,       ///< an integer literal: `ival`
  Float,     ///< an f32 literal: `fval`
  Unary,     ///< `op` args[0] (op: "-", "!", "&", "*")
  Binary,    ///< args[0] `op` args[1]
  Call,      ///< `name`(args…); name may carry template arguments ("strata_rt::cp_async<16>")
  Index,     ///< args[0][args[1]]
  Cast,      ///< `name`<type>(args[0]): static_cast / reinterpret_cast to `type`; name "":
             ///< the C cast `(type)args[0]`
  Select,    ///< args[0] ? args[1] : args[2]
  Verbatim,  ///< text from a helper that spells a runtime expression (printed as is)
};

struct ExprNode {
  ExprKind kind = ExprKind::Var;
  std::string name;  ///< Var / Call name, Unary / Binary operator, Cast kind, Verbatim text
  std::string type;  ///< Cast: the target type; Int: the literal's suffix ("LL")
  int64_t ival = 0;
  double fval = 0;
  std::vector<Expr> args;
};

Expr var(std::string name);
Expr int_lit(int64_t v);
/// An integer literal with a type suffix ("LL", "ULL"): 64-bit arithmetic where it appears.
Expr int_lit(int64_t v, std::string suffix);
Expr float_lit(double v);
/// A runtime expression spelled as text (e.g. by ReductionCode); parenthesized by the printer
/// where it is an operand, unless it is a single name, literal or call.
Expr verbatim(std::string text);
Expr unary(std::string op, Expr a);
Expr binary(std::string op, Expr a, Expr b);
Expr call(std::string callee, std::vector<Expr> args = {});
Expr index(Expr base, Expr i);
Expr static_cast_to(std::string type, Expr a);
Expr reinterpret_cast_to(std::string type, Expr a);
/// `(type)a` (`(void)x` marks a variable used).
Expr c_cast(std::string type, Expr a);
Expr select(Expr c, Expr a, Expr b);
Expr addr(Expr a);  ///< &a

// Folding arithmetic (int literals combined, identities removed).
Expr operator+(Expr a, Expr b);
Expr operator-(Expr a, Expr b);
Expr operator*(Expr a, Expr b);
Expr operator/(Expr a, Expr b);
Expr operator%(Expr a, Expr b);
Expr operator<(Expr a, Expr b);
Expr operator<=(Expr a, Expr b);
Expr operator>(Expr a, Expr b);
Expr operator>=(Expr a, Expr b);
Expr eq(Expr a, Expr b);
Expr ne(Expr a, Expr b);
Expr land(Expr a, Expr b);  ///< a && b
Expr lor(Expr a, Expr b);   ///< a || b
/// a + b + … of the terms (null terms skipped, sums among them joined into one chain of
/// integer additions); 0 when none is left.
Expr sum(const std::vector<Expr>& terms);

struct StmtNode;
using Stmt = std::shared_ptr<StmtNode>;

enum class StmtKind : uint8_t {
  Seq,         ///< body, in order, without braces
  Scope,       ///< `header {` body `}suffix` (header "" gives a plain block)
  Decl,        ///< `type name[dims] = init, name2 = init2;` (names / inits / dims parallel)
  Assign,      ///< `lhs op rhs;` (op "=", "+=", …)
  Eval,        ///< `expr;`
  For,         ///< `for (int var = init; cond; step) {` body `}` with an optional unroll pragma
  If,          ///< `if (cond) {` body `}` [`else {` else_body `}`]
  Break,       ///< `break;`
  Continue,    ///< `continue;`
  Return,      ///< `return expr;` (exprs[0]; null: `return;`)
  LambdaCall,  ///< `text(args…, [&](params) {` body `});`: a runtime function applying a
               ///< callback (exprs: args; names[0]: the parameter list)
  Comment,     ///< `// text`
  Verbatim,    ///< one line of text as is (pragmas, `using` aliases, preprocessor lines)
};

struct StmtNode {
  StmtKind kind = StmtKind::Seq;
  std::string text;                ///< Scope header, Decl type, Assign op, Comment / Verbatim text
  std::string suffix;              ///< Scope: after the closing brace (";", "  // namespace")
  std::string comment;             ///< a trailing `// comment` (Decl, Assign, Eval)
  std::vector<std::string> names;  ///< Decl: declared names; For: the loop variable
  std::vector<Expr> exprs;         ///< Decl: initializers (null: none); Assign: lhs, rhs;
                                   ///< Eval: the expression; For: init, cond, step (null step:
                                   ///< ++var); If: cond; Return: the value (null: none)
  std::vector<int64_t> dims;       ///< Decl: array extents of each declarator (0: scalar)
  std::string pragma;              ///< For: "" or "unroll" / "unroll 1" (`#pragma …` before it)
  std::vector<Stmt> body, else_body;
  /// For / If with one simple statement (Decl, Assign, Eval, Break, Continue, Return) as its
  /// body: printed on one line without braces (`if (c) break;`).
  bool compact = false;
};

Stmt seq(std::vector<Stmt> body = {});
Stmt scope(std::string header, std::vector<Stmt> body = {}, std::string suffix = "");
/// `type name = init;` (init null: no initializer).
Stmt decl(std::string type, std::string name, Expr init = {}, std::string comment = "");
/// Several declarators of one type: `type a = x, b = y;`.
Stmt decl_many(std::string type, std::vector<std::string> names, std::vector<Expr> inits);
/// `type name[n0][n1]… = init;` (init null: none; `{}` zero-fills: aggregate_zero()).
Stmt decl_array(std::string type, std::string name, std::vector<int64_t> extents, Expr init = {},
                std::string comment = "");
/// The aggregate initializer `{}`.
Expr aggregate_zero();
Stmt assign(Expr lhs, Expr rhs, std::string op = "=", std::string comment = "");
Stmt eval(Expr e, std::string comment = "");
Stmt for_loop(std::string var, Expr init, Expr cond, Expr step = {}, std::string pragma = "");
/// The same with a loop variable of type `type` (e.g. "long long").
Stmt for_typed(std::string type, std::string var, Expr init, Expr cond, Expr step = {},
               std::string pragma = "");
Stmt if_then(Expr cond);
/// `if (cond) s` / `for (…) s` on one line (StmtNode::compact).
Stmt if_compact(Expr cond, Stmt s);
Stmt for_compact(std::string var, Expr init, Expr cond, Stmt s, std::string pragma = "");
Stmt brk();
/// `continue;`
Stmt cont();
/// `return e;` (`return;` when e is null).
Stmt ret(Expr e = {});
/// `callee(args…, [&](params) { … });` (the body is filled through CodeWriter::open).
Stmt lambda_call(std::string callee, std::vector<Expr> args, std::string params);
Stmt comment(std::string text);
Stmt verbatim_stmt(std::string text);
/// `__syncthreads();`
Stmt sync_threads();

/// Every statement of `s` (itself and nested ones), depth first, in order.
std::vector<const StmtNode*> walk(const Stmt& s);

}  // namespace strata::codegen::ir
