#include "cuda_ir.h"

#include <functional>

namespace strata::codegen::ir {
namespace {

Expr node(ExprKind kind, std::string name, std::vector<Expr> args = {}) {
  auto n = std::make_shared<ExprNode>();
  n->kind = kind;
  n->name = std::move(name);
  n->args = std::move(args);
  return Expr(std::move(n));
}

Stmt stmt(StmtKind kind) {
  auto s = std::make_shared<StmtNode>();
  s->kind = kind;
  return s;
}

}  // namespace

Expr::Expr(int64_t v) : Expr(int_lit(v)) {}

bool Expr::is(int64_t v) const {
  int64_t x = 0;
  return is_int(&x) && x == v;
}

bool Expr::is_int(int64_t* v) const {
  if (!n_ || n_->kind != ExprKind::Int) return false;
  if (v) *v = n_->ival;
  return true;
}

Expr var(std::string name) {
  return node(ExprKind::Var, std::move(name));
}

Expr int_lit(int64_t v) {
  auto n = std::make_shared<ExprNode>();
  n->kind = ExprKind::Int;
  n->ival = v;
  return Expr(std::move(n));
}

Expr int_lit(int64_t v, std::string suffix) {
  Expr e = int_lit(v);
  const_cast<ExprNode*>(e.get())->type = std::move(suffix);
  return e;
}

Expr float_lit(double v) {
  auto n = std::make_shared<ExprNode>();
  n->kind = ExprKind::Float;
  n->fval = v;
  return Expr(std::move(n));
}

Expr verbatim(std::string text) {
  return node(ExprKind::Verbatim, std::move(text));
}

Expr unary(std::string op, Expr a) {
  return node(ExprKind::Unary, std::move(op), {std::move(a)});
}

Expr binary(std::string op, Expr a, Expr b) {
  return node(ExprKind::Binary, std::move(op), {std::move(a), std::move(b)});
}

Expr call(std::string callee, std::vector<Expr> args) {
  return node(ExprKind::Call, std::move(callee), std::move(args));
}

Expr index(Expr base, Expr i) {
  return node(ExprKind::Index, "", {std::move(base), std::move(i)});
}

Expr static_cast_to(std::string type, Expr a) {
  Expr e = node(ExprKind::Cast, "static_cast", {std::move(a)});
  const_cast<ExprNode*>(e.get())->type = std::move(type);
  return e;
}

Expr reinterpret_cast_to(std::string type, Expr a) {
  Expr e = node(ExprKind::Cast, "reinterpret_cast", {std::move(a)});
  const_cast<ExprNode*>(e.get())->type = std::move(type);
  return e;
}

Expr c_cast(std::string type, Expr a) {
  Expr e = node(ExprKind::Cast, "", {std::move(a)});
  const_cast<ExprNode*>(e.get())->type = std::move(type);
  return e;
}

Expr select(Expr c, Expr a, Expr b) {
  return node(ExprKind::Select, "", {std::move(c), std::move(a), std::move(b)});
}

Expr addr(Expr a) {
  return unary("&", std::move(a));
}

Expr operator+(Expr a, Expr b) {
  int64_t x = 0, y = 0;
  if (a.is_int(&x) && b.is_int(&y)) return int_lit(x + y);
  if (a.is(0)) return b;
  if (b.is(0)) return a;
  return binary("+", std::move(a), std::move(b));
}

Expr operator-(Expr a, Expr b) {
  int64_t x = 0, y = 0;
  if (a.is_int(&x) && b.is_int(&y)) return int_lit(x - y);
  if (b.is(0)) return a;
  return binary("-", std::move(a), std::move(b));
}

Expr operator*(Expr a, Expr b) {
  int64_t x = 0, y = 0;
  if (a.is_int(&x) && b.is_int(&y)) return int_lit(x * y);
  if (a.is(0) || b.is(0)) return int_lit(0);
  if (a.is(1)) return b;
  if (b.is(1)) return a;
  return binary("*", std::move(a), std::move(b));
}

Expr operator/(Expr a, Expr b) {
  int64_t x = 0, y = 0;
  if (a.is_int(&x) && b.is_int(&y) && y != 0) return int_lit(x / y);
  if (b.is(1) || a.is(0)) return a;
  return binary("/", std::move(a), std::move(b));
}

Expr operator%(Expr a, Expr b) {
  int64_t x = 0, y = 0;
  if (a.is_int(&x) && b.is_int(&y) && y != 0) return int_lit(x % y);
  if (b.is(1) || a.is(0)) return int_lit(0);
  return binary("%", std::move(a), std::move(b));
}

Expr operator<(Expr a, Expr b) {
  return binary("<", std::move(a), std::move(b));
}
Expr operator<=(Expr a, Expr b) {
  return binary("<=", std::move(a), std::move(b));
}
Expr operator>(Expr a, Expr b) {
  return binary(">", std::move(a), std::move(b));
}
Expr operator>=(Expr a, Expr b) {
  return binary(">=", std::move(a), std::move(b));
}
Expr eq(Expr a, Expr b) {
  return binary("==", std::move(a), std::move(b));
}
Expr ne(Expr a, Expr b) {
  return binary("!=", std::move(a), std::move(b));
}
Expr land(Expr a, Expr b) {
  return binary("&&", std::move(a), std::move(b));
}
Expr lor(Expr a, Expr b) {
  return binary("||", std::move(a), std::move(b));
}

Expr sum(const std::vector<Expr>& terms) {
  Expr s;
  std::function<void(const Expr&)> add = [&](const Expr& t) {
    if (!t || t.is(0)) return;
    if (s && t->kind == ExprKind::Binary && t->name == "+") {
      add(t->args[0]);
      add(t->args[1]);
      return;
    }
    s = s ? s + t : t;
  };
  for (const Expr& t : terms) add(t);
  return s ? s : int_lit(0);
}

Stmt seq(std::vector<Stmt> body) {
  Stmt s = stmt(StmtKind::Seq);
  s->body = std::move(body);
  return s;
}

Stmt scope(std::string header, std::vector<Stmt> body, std::string suffix) {
  Stmt s = stmt(StmtKind::Scope);
  s->text = std::move(header);
  s->body = std::move(body);
  s->suffix = std::move(suffix);
  return s;
}

Stmt decl(std::string type, std::string name, Expr init, std::string comment) {
  Stmt s = stmt(StmtKind::Decl);
  s->text = std::move(type);
  s->names = {std::move(name)};
  s->exprs = {std::move(init)};
  s->comment = std::move(comment);
  return s;
}

Stmt decl_many(std::string type, std::vector<std::string> names, std::vector<Expr> inits) {
  Stmt s = stmt(StmtKind::Decl);
  s->text = std::move(type);
  s->names = std::move(names);
  s->exprs = std::move(inits);
  return s;
}

Stmt decl_array(std::string type, std::string name, std::vector<int64_t> extents, Expr init,
                std::string comment) {
  Stmt s = decl(std::move(type), std::move(name), std::move(init), std::move(comment));
  s->dims = std::move(extents);
  return s;
}

Expr aggregate_zero() {
  return verbatim("{}");
}

Stmt assign(Expr lhs, Expr rhs, std::string op, std::string comment) {
  Stmt s = stmt(StmtKind::Assign);
  s->text = std::move(op);
  s->exprs = {std::move(lhs), std::move(rhs)};
  s->comment = std::move(comment);
  return s;
}

Stmt eval(Expr e, std::string comment) {
  Stmt s = stmt(StmtKind::Eval);
  s->exprs = {std::move(e)};
  s->comment = std::move(comment);
  return s;
}

Stmt for_loop(std::string v, Expr init, Expr cond, Expr step, std::string pragma) {
  Stmt s = stmt(StmtKind::For);
  s->names = {std::move(v)};
  s->exprs = {std::move(init), std::move(cond), std::move(step)};
  s->pragma = std::move(pragma);
  s->text = "int";
  return s;
}

Stmt for_typed(std::string type, std::string v, Expr init, Expr cond, Expr step,
               std::string pragma) {
  Stmt s =
      for_loop(std::move(v), std::move(init), std::move(cond), std::move(step), std::move(pragma));
  s->text = std::move(type);
  return s;
}

Stmt if_then(Expr cond) {
  Stmt s = stmt(StmtKind::If);
  s->exprs = {std::move(cond)};
  return s;
}

Stmt if_compact(Expr cond, Stmt body) {
  Stmt s = if_then(std::move(cond));
  s->body = {std::move(body)};
  s->compact = true;
  return s;
}

Stmt for_compact(std::string v, Expr init, Expr cond, Stmt body, std::string pragma) {
  Stmt s = for_loop(std::move(v), std::move(init), std::move(cond), {}, std::move(pragma));
  s->body = {std::move(body)};
  s->compact = true;
  return s;
}

Stmt lambda_call(std::string callee, std::vector<Expr> args, std::string params) {
  Stmt s = stmt(StmtKind::LambdaCall);
  s->text = std::move(callee);
  s->exprs = std::move(args);
  s->names = {std::move(params)};
  return s;
}

Stmt brk() {
  return stmt(StmtKind::Break);
}

Stmt cont() {
  return stmt(StmtKind::Continue);
}

Stmt ret(Expr e) {
  Stmt s = stmt(StmtKind::Return);
  s->exprs = {std::move(e)};
  return s;
}

Stmt comment(std::string text) {
  Stmt s = stmt(StmtKind::Comment);
  s->text = std::move(text);
  return s;
}

Stmt verbatim_stmt(std::string text) {
  Stmt s = stmt(StmtKind::Verbatim);
  s->text = std::move(text);
  return s;
}

Stmt sync_threads() {
  return eval(call("__syncthreads"));
}

std::vector<const StmtNode*> walk(const Stmt& root) {
  std::vector<const StmtNode*> out;
  std::function<void(const StmtNode&)> visit = [&](const StmtNode& s) {
    out.push_back(&s);
    for (const Stmt& b : s.body) visit(*b);
    for (const Stmt& b : s.else_body) visit(*b);
  };
  if (root) visit(*root);
  return out;
}

}  // namespace strata::codegen::ir
