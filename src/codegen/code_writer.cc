#include "code_writer.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace strata::codegen {

void CodeWriter::add(ir::Stmt s) {
  open_.back()->body.push_back(std::move(s));
}

void CodeWriter::open(ir::Stmt s) {
  ir::StmtNode* n = s.get();
  add(std::move(s));
  open_.push_back(n);
}

void CodeWriter::close(const std::string& suffix) {
  if (open_.size() > 1) {
    open_.back()->suffix = suffix;
    open_.pop_back();
  }
}

void CodeWriter::raw(const std::string& text) {
  std::istringstream in(text);
  std::string l;
  while (std::getline(in, l)) line(l);
}

std::string cuda_type(DType t) {
  switch (t) {
    case DType::f16:
      return "__half";
    case DType::bf16:
      return "__nv_bfloat16";
    case DType::f32:
      return "float";
  }
  return "float";
}

std::string identifier(const std::string& prefix, const std::string& name) {
  std::string id = prefix;
  for (char c : name) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    id += ok ? c : '_';
  }
  return id;
}

std::string lit(int64_t v) {
  return std::to_string(v);
}

std::string float_lit(double v) {
  return ir::float_text(v);
}

std::string mul(const std::string& a, int64_t b) {
  if (a == "0" || b == 0) return "0";
  if (b == 1) return a;
  if (a == "1") return lit(b);
  return paren(a) + " * " + lit(b);
}

std::string sum(const std::vector<std::string>& terms) {
  std::string s;
  for (const std::string& t : terms) {
    if (t == "0" || t.empty()) continue;
    s += s.empty() ? t : " + " + t;
  }
  return s.empty() ? "0" : s;
}

std::string paren(const std::string& e) {
  if (!e.empty() && e.front() == '(') {  // already wrapped whole: "(a + b)", not "(a) + (b)"
    int depth = 0;
    size_t close = 0;
    for (size_t i = 0; i < e.size(); ++i) {
      depth += e[i] == '(' ? 1 : e[i] == ')' ? -1 : 0;
      if (depth == 0) {
        close = i;
        break;
      }
    }
    if (close + 1 == e.size()) return e;
  }
  for (char c : e)
    if (c == ' ' || c == '+' || c == '-' || c == '*' || c == '/' || c == '%' || c == '?' ||
        c == '^' || c == '&' || c == '<' || c == '>')
      return "(" + e + ")";
  return e;
}

std::vector<ir::Expr> unflatten(const ir::Expr& flat, const Shape& shape) {
  std::vector<ir::Expr> idx(shape.rank(), ir::int_lit(0));
  int first = -1;  // outermost dim with extent > 1
  for (int d = 0; d < shape.rank(); ++d)
    if (shape[d] != 1) {
      first = d;
      break;
    }
  int64_t inner = 1;
  for (int d = shape.rank() - 1; d >= 0; --d) {
    if (shape[d] != 1) {
      ir::Expr q = flat / inner;
      idx[d] = d == first ? q : q % shape[d];
    }
    inner *= shape[d];
  }
  return idx;
}

ir::Expr linear_offset(const ir::Expr& flat, const Shape& shape,
                       const std::vector<int64_t>& strides) {
  struct Run {
    int64_t extent, stride;
  };
  std::vector<Run> runs;  // innermost first
  for (int d = shape.rank() - 1; d >= 0; --d) {
    if (shape[d] == 1) continue;
    if (!runs.empty() && strides[d] == runs.back().stride * runs.back().extent)
      runs.back().extent *= shape[d];
    else
      runs.push_back({shape[d], strides[d]});
  }
  std::vector<ir::Expr> terms;
  int64_t inner = 1;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (runs[i].stride != 0) {
      ir::Expr q = flat / inner;  // the outermost run's index is not reduced (flat is in range)
      terms.push_back((i + 1 < runs.size() ? q % runs[i].extent : q) * runs[i].stride);
    }
    inner *= runs[i].extent;
  }
  return ir::sum(std::vector<ir::Expr>(terms.rbegin(), terms.rend()));  // outermost first
}

std::vector<ir::Expr> broadcast_index(const Shape& operand, const std::vector<ir::Expr>& out_idx) {
  const int r = static_cast<int>(out_idx.size());
  std::vector<ir::Expr> idx(operand.rank(), ir::int_lit(0));
  for (int d = 0; d < operand.rank(); ++d) {
    int od = d + r - operand.rank();
    if (operand[d] != 1 && od >= 0) idx[d] = out_idx[od];
  }
  return idx;
}

std::vector<std::string> texts(const std::vector<ir::Expr>& e) {
  std::vector<std::string> t;
  for (const ir::Expr& x : e) t.push_back(ir::print_expr(x));
  return t;
}

std::vector<ir::Expr> exprs(const std::vector<std::string>& t) {
  std::vector<ir::Expr> e;
  for (const std::string& x : t) {
    char* end = nullptr;
    const long long v = x.empty() ? 0 : std::strtoll(x.c_str(), &end, 10);
    e.push_back(!x.empty() && *end == '\0' ? ir::int_lit(v) : ir::verbatim(x));
  }
  return e;
}

std::vector<std::string> broadcast_index(const Shape& operand,
                                         const std::vector<std::string>& out_idx) {
  const int r = static_cast<int>(out_idx.size());
  std::vector<std::string> idx(operand.rank(), "0");
  for (int d = 0; d < operand.rank(); ++d) {
    int od = d + r - operand.rank();
    idx[d] = (operand[d] == 1 || od < 0) ? "0" : out_idx[od];
  }
  return idx;
}

std::string scalar_op_expr(OpKind kind, const std::vector<std::string>& a, const OpAttrs& attrs) {
  // strata_rt::op_<name>(operands…, scalar attributes…): the runtime's naming contract
  // (runtime/strata_rt/math.cuh).
  std::string call = "strata_rt::op_" + std::string(op_name(kind)) + "(";
  for (int i = 0; i < op_info(kind).arity; ++i) call += (i ? ", " : "") + a[i];
  for (const AttrSpec& spec : attr_specs(kind))
    call += ", " + float_lit(get_real_attr(attrs, spec.field));
  return call + ")";
}

}  // namespace strata::codegen
