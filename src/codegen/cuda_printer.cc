#include "cuda_printer.h"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace strata::codegen::ir {
namespace {

/// C++ precedence rank of a binary operator (smaller binds tighter).
int rank(const std::string& op) {
  if (op == "*" || op == "/" || op == "%") return 5;
  if (op == "+" || op == "-") return 6;
  if (op == "<<" || op == ">>") return 7;
  if (op == "<" || op == "<=" || op == ">" || op == ">=") return 9;
  if (op == "==" || op == "!=") return 10;
  if (op == "&") return 11;
  if (op == "^") return 12;
  if (op == "|") return 13;
  if (op == "&&") return 14;
  if (op == "||") return 15;
  return 16;
}

bool verbatim_atomic(const std::string& e) {
  // A single name, literal, call or parenthesized expression: no operator at depth 0.
  int depth = 0;
  for (size_t i = 0; i < e.size(); ++i) {
    const char c = e[i];
    const bool angle = (c == '<' || c == '>') && i > 0 && e[i - 1] != ' ' && e[i - 1] != '-';
    if (c == '(' || c == '[' || (c == '<' && angle)) ++depth;
    if (c == ')' || c == ']' || (c == '>' && angle)) --depth;
    if (depth == 0 && (c == ' ' || c == '+' || c == '*' || c == '/' || c == '%' || c == '?' ||
                       c == '^' || c == '&' || c == '|' || (c == '-' && i > 0)))
      return false;
  }
  return !e.empty();
}

/// Precedence rank of an expression as an operand (0: atomic / postfix, 3: unary, binary ranks,
/// 16: conditional).
int expr_rank(const Expr& e) {
  switch (e->kind) {
    case ExprKind::Var:
    case ExprKind::Float:
    case ExprKind::Call:
    case ExprKind::Index:
      return 0;
    case ExprKind::Cast:
      return e->name.empty() ? 3 : 0;
    case ExprKind::Int:
      return e->ival < 0 ? 3 : 0;
    case ExprKind::Unary:
      return 3;
    case ExprKind::Binary:
      return rank(e->name);
    case ExprKind::Select:
      return 16;
    case ExprKind::Verbatim:
      return verbatim_atomic(e->name) ? 0 : 17;
  }
  return 17;
}

bool needs_parens(const Expr& parent, const Expr& child, bool right) {
  const int pr = rank(parent->name), cr = expr_rank(child);
  if (cr > pr) return true;
  if (child->kind != ExprKind::Binary) return false;
  if (cr == pr && right) return true;
  // Shifts and bitwise operators inside another operator: always parenthesized.
  if ((cr == 7 || (cr >= 11 && cr <= 13)) && child->name != parent->name) return true;
  // Clarity in * / %: an operator operand is parenthesized, except a quotient taken modulo.
  if (pr == 5) return !(parent->name == "%" && child->name == "/" && !right);
  if (pr >= 7 && pr != 9 && pr != 10) return child->name != parent->name;  // & ^ | && || << >>
  return false;
}

std::string print_operand(const Expr& parent, const Expr& child, bool right) {
  std::string s = print_expr(child);
  return needs_parens(parent, child, right) ? "(" + s + ")" : s;
}

std::string args_text(const std::vector<Expr>& args, size_t from = 0) {
  std::string s;
  for (size_t i = from; i < args.size(); ++i) s += (i > from ? ", " : "") + print_expr(args[i]);
  return s;
}

class Printer {
 public:
  void print(const StmtNode& s) {
    switch (s.kind) {
      case StmtKind::Seq:
        for (const Stmt& b : s.body) print(*b);
        return;
      case StmtKind::Scope:
        line(s.text.empty() ? "{" : s.text + " {");
        body(s.body);
        line("}" + s.suffix);
        return;
      case StmtKind::Decl: {
        std::string t = s.text + " ";
        for (size_t i = 0; i < s.names.size(); ++i) {
          t += (i ? ", " : "") + s.names[i];
          if (s.names.size() == 1)
            for (int64_t n : s.dims) t += "[" + std::to_string(n) + "]";
          if (i < s.exprs.size() && s.exprs[i]) t += " = " + print_expr(s.exprs[i]);
        }
        line(t + ";" + trailing(s));
        return;
      }
      case StmtKind::Assign:
        line(print_expr(s.exprs[0]) + " " + s.text + " " + print_expr(s.exprs[1]) + ";" +
             trailing(s));
        return;
      case StmtKind::Eval:
        line(print_expr(s.exprs[0]) + ";" + trailing(s));
        return;
      case StmtKind::For: {
        if (!s.pragma.empty()) line("#pragma " + s.pragma);
        if (s.compact) {
          line(for_header(s) + " " + single(s));
          return;
        }
        const std::string& v = s.names[0];
        const std::string step = s.exprs[2] ? v + " += " + print_expr(s.exprs[2]) : "++" + v;
        line(for_header(s) + " {");
        body(s.body);
        line("}");
        return;
      }
      case StmtKind::If:
        if (s.compact) {
          line("if (" + print_expr(s.exprs[0]) + ") " + single(s));
          return;
        }
        line("if (" + print_expr(s.exprs[0]) + ") {");
        body(s.body);
        if (!s.else_body.empty()) {
          line("} else {");
          body(s.else_body);
        }
        line("}");
        return;
      case StmtKind::LambdaCall:
        line(s.text + "(" + args_text(s.exprs) + (s.exprs.empty() ? "" : ", ") + "[&](" +
             s.names[0] + ") {");
        body(s.body);
        line("});");
        return;
      case StmtKind::Break:
        line("break;");
        return;
      case StmtKind::Continue:
        line("continue;");
        return;
      case StmtKind::Return:
        line(s.exprs[0] ? "return " + print_expr(s.exprs[0]) + ";" : "return;");
        return;
      case StmtKind::Comment:
        line("// " + s.text);
        return;
      case StmtKind::Verbatim:
        line(s.text);
        return;
    }
  }
  std::string str() const { return out_.str(); }

 private:
  static std::string for_header(const StmtNode& s) {
    const std::string& v = s.names[0];
    const std::string step = s.exprs[2] ? v + " += " + print_expr(s.exprs[2]) : "++" + v;
    return "for (" + s.text + " " + v + " = " + print_expr(s.exprs[0]) + "; " +
           print_expr(s.exprs[1]) + "; " + step + ")";
  }
  /// The one simple statement of a compact for / if, as text without indentation.
  static std::string single(const StmtNode& s) {
    Printer p;
    p.print(*s.body.at(0));
    std::string t = p.str();
    while (!t.empty() && t.back() == '\n') t.pop_back();
    return t;
  }
  static std::string trailing(const StmtNode& s) {
    return s.comment.empty() ? "" : "  // " + s.comment;
  }
  void body(const std::vector<Stmt>& b) {
    ++indent_;
    for (const Stmt& s : b) print(*s);
    --indent_;
  }
  void line(const std::string& text) {
    if (!text.empty()) out_ << std::string(2 * indent_, ' ') << text;
    out_ << "\n";
  }
  std::ostringstream out_;
  int indent_ = 0;
};

}  // namespace

std::string float_text(double v) {
  if (std::isinf(v)) return v > 0 ? "__int_as_float(0x7f800000)" : "__int_as_float(0xff800000)";
  if (std::isnan(v)) return "__int_as_float(0x7fc00000)";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s + "f";
}

std::string print_expr(const Expr& e) {
  if (!e) return "";
  switch (e->kind) {
    case ExprKind::Var:
      return e->name;
    case ExprKind::Int:
      return std::to_string(e->ival) + e->type;
    case ExprKind::Float:
      return float_text(e->fval);
    case ExprKind::Verbatim:
      return e->name;
    case ExprKind::Unary: {
      const std::string a = print_expr(e->args[0]);
      return e->name + (expr_rank(e->args[0]) > 3 ? "(" + a + ")" : a);
    }
    case ExprKind::Binary:
      return print_operand(e, e->args[0], false) + " " + e->name + " " +
             print_operand(e, e->args[1], true);
    case ExprKind::Call:
      return e->name + "(" + args_text(e->args) + ")";
    case ExprKind::Index: {
      const std::string b = print_expr(e->args[0]);
      return (expr_rank(e->args[0]) > 0 ? "(" + b + ")" : b) + "[" + print_expr(e->args[1]) + "]";
    }
    case ExprKind::Cast: {
      if (!e->name.empty()) return e->name + "<" + e->type + ">(" + print_expr(e->args[0]) + ")";
      const std::string a = print_expr(e->args[0]);
      return "(" + e->type + ")" + (expr_rank(e->args[0]) > 0 ? "(" + a + ")" : a);
    }
    case ExprKind::Select: {
      auto part = [](const Expr& x) {
        const std::string s = print_expr(x);
        return expr_rank(x) >= 16 ? "(" + s + ")" : s;
      };
      return part(e->args[0]) + " ? " + part(e->args[1]) + " : " + part(e->args[2]);
    }
  }
  return "";
}

std::string print_cuda(const Stmt& s) {
  Printer p;
  if (s) p.print(*s);
  return p.str();
}

}  // namespace strata::codegen::ir
