#include "strata/frontend/program_parser.h"
#include "strata/ir/rank_expansion.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>

#include "frontend/program_lexer.h"
#include "strata/ir/json_read.h"

namespace strata {
namespace {

using frontend::describe;
using frontend::Token;
using frontend::TokKind;

/// Deepest nesting of calls accepted in one statement (keeps recursion bounded).
constexpr int kMaxNesting = 64;

// ---- op signatures ---------------------------------------------------------------------

enum class ParamType : uint8_t { Tensor, Int, Real };

struct Param {
  std::string_view name;
  ParamType type = ParamType::Tensor;
  bool required = true;
  double default_value = 0;
  AttrField field = AttrField::Dim;  ///< the OpAttrs field a non-tensor parameter sets
  std::string_view alias;            ///< a second accepted keyword ("" if none)
};

/// The tensor parameters of a kernel op, by category (docs/program-format.md).
std::vector<Param> tensor_params(OpKind kind) {
  switch (op_category(kind)) {
    case Category::Matmul:
    case Category::Binary:
    case Category::Concat:
      return {{"a"}, {"b"}};
    case Category::Unary:
    case Category::Reduce:
    case Category::Norm:
    case Category::Layout:
    case Category::Scan:
    case Category::Collective:
      return {{"x"}};
    case Category::Source:
    case Category::Sink:
    case Category::Customized:
    case Category::Accum:
    case Category::Fused:
      break;
  }
  return {};
}

/// The call signature of a kernel op in programs: its tensors, then its attributes from the
/// op table's attribute set.
std::vector<Param> signature(OpKind kind) {
  std::vector<Param> sig = tensor_params(kind);
  for (const AttrSpec& a : attr_specs(kind))
    sig.push_back({a.name, a.is_int ? ParamType::Int : ParamType::Real, a.required, a.default_value,
                   a.field, a.alias});
  return sig;
}

/// Composite ops: program ops that expand into several table ops when parsed
/// (docs/program-format.md). Their results are the same μGraph as the expansion written out.
struct Composite {
  std::string_view name;
  std::vector<Param> params;
};

const std::vector<Composite>& composites() {
  static const std::vector<Composite> c = {
      // softmax(x, dim) = exp(x − max(x, dim)) / sum(exp(x − max(x, dim)), dim)
      {"softmax", {{"x"}, {"dim", ParamType::Int, false, -1, AttrField::Dim}}},
      // layer_norm(x, dim, eps) = (x − mean(x)) / sqrt(mean((x − mean(x))²) + eps)
      {"layer_norm",
       {{"x"},
        {"dim", ParamType::Int, false, -1, AttrField::Dim},
        {"eps", ParamType::Real, false, 0, AttrField::Scalar}}},
  };
  return c;
}

const Composite* find_composite(std::string_view name) {
  for (const Composite& c : composites())
    if (c.name == name) return &c;
  return nullptr;
}

/// "sum(x, dim, to=1)".
std::string signature_text(std::string_view op, const std::vector<Param>& sig) {
  std::string s = std::string(op) + "(";
  bool first = true;
  for (const Param& p : sig) {
    if (!first) s += ", ";
    first = false;
    s += p.name;
    if (!p.required) {
      s += "=";
      if (p.type == ParamType::Int) {
        s += std::to_string(static_cast<int64_t>(p.default_value));
      } else {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%g", p.default_value);
        s += buf;
      }
    }
  }
  return s + ")";
}

/// Every name a program may call: table ops, then composites.
std::vector<std::string> program_op_names() {
  std::vector<std::string> names;
  for (const OpInfo& info : op_table())
    if (is_program_op(info.kind)) names.emplace_back(info.name);
  for (const Composite& c : composites()) names.emplace_back(c.name);
  return names;
}

std::string program_op_list() {
  std::string s;
  for (const std::string& n : program_op_names()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1] ? 1u : 0u)});
      diag = up;
    }
  }
  return row[b.size()];
}

/// The candidate closest to `word` within edit distance 2, or "".
std::string closest(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = 3;
  for (const std::string& c : candidates) {
    size_t d = edit_distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  std::string c = closest(word, candidates);
  return c.empty() ? "" : " (did you mean `" + c + "`?)";
}

/// Drops the "kernel op #N (op): " and "op: " prefixes the IR puts on its messages; the
/// parser locates the error by file, line and column and names the op itself.
std::string strip_ir_location(std::string msg, std::string_view op) {
  if (msg.rfind("kernel op #", 0) == 0) {
    size_t p = msg.find("): ");
    if (p != std::string::npos) msg = msg.substr(p + 3);
  }
  std::string own = std::string(op) + ": ";
  if (msg.rfind(own, 0) == 0) msg = msg.substr(own.size());
  return msg;
}

// ---- syntax tree of one statement's right-hand side ------------------------------------

struct Call;

/// A name, a number, or a call (then `tok` is the op name).
struct Expr {
  Token tok;
  std::unique_ptr<Call> call;
};

struct Arg {
  std::optional<Token> key;
  Expr value;
};

struct Call {
  Token op;
  std::vector<Arg> args;
};

// ---- the parser ------------------------------------------------------------------------

class ProgramParser {
 public:
  explicit ProgramParser(const std::string& file) : file_(file) {}

  Result<KernelGraph> run(std::string_view text) {
    int line_no = 0;
    size_t start = 0;
    while (start <= text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string_view::npos) end = text.size();
      ++line_no;
      STRATA_ASSIGN_OR_RETURN(toks_,
                              frontend::lex_line(text.substr(start, end - start), line_no, file_));
      pos_ = 0;
      STRATA_RETURN_IF_ERROR(statement());
      if (end == text.size()) break;
      start = end + 1;
    }
    STRATA_RETURN_IF_ERROR(check_generated_names());
    if (g_.outputs().empty()) {
      size_t last_nl = text.rfind('\n');
      std::string_view tail = last_nl == std::string_view::npos ? text : text.substr(last_nl + 1);
      int col = 1;
      for (char c : tail)
        if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++col;
      return frontend::located_error(
          file_, line_no, col,
          "found end of file without an `output` statement; expected at least one `output NAME` "
          "naming the program's results");
    }
    return std::move(g_);
  }

 private:
  struct Def {
    int tensor;
    int line, col;
  };

  Error error_at(const Token& t, const std::string& msg) const {
    return frontend::located_error(file_, t.line, t.col, msg);
  }
  const Token& peek(size_t ahead = 0) const {
    return toks_[std::min(pos_ + ahead, toks_.size() - 1)];
  }
  Token next() {
    Token t = peek();
    if (pos_ < toks_.size() - 1) ++pos_;
    return t;
  }
  Status expect_end() {
    if (peek().kind == TokKind::End) return Status::success();
    return error_at(peek(), "found " + describe(peek()) +
                                " after the end of the statement; expected end of line");
  }

  Status statement() {
    const Token& first = peek();
    if (first.kind == TokKind::End) return Status::success();
    bool assign = first.kind == TokKind::Ident && peek(1).kind == TokKind::Equals;
    if (first.kind == TokKind::Ident && !assign) {
      if (first.text == "input") return input_statement();
      if (first.text == "output") return output_statement();
      if (first.text == "ranks") return ranks_statement();
      if (peek(1).kind == TokKind::LParen)
        return error_at(
            first, "found a call to `" + first.text +
                       "` whose result is not assigned; expected `NAME = " + first.text + "(...)`");
      return error_at(peek(1), "found " + describe(peek(1)) + " after `" + first.text +
                                   "`; expected `=` to assign a tensor (`" + first.text +
                                   " = op(...)`)");
    }
    if (assign) return assignment();
    return error_at(first, "found " + describe(first) +
                               "; expected a statement: `input NAME: DTYPE[dims]`, "
                               "`NAME = op(...)` or `output NAME`");
  }

  /// Checks that `t` may name a new tensor.
  Status check_new_name(const Token& t, const char* what) {
    if (t.kind != TokKind::Ident) return error_at(t, "found " + describe(t) + "; expected " + what);
    if (t.text == "input" || t.text == "output")
      return error_at(t, "`" + t.text + "` is a reserved word; expected a different tensor name");
    if (auto it = defs_.find(t.text); it != defs_.end())
      return error_at(t, "duplicate name `" + t.text + "` (first defined at line " +
                             std::to_string(it->second.line) + ", column " +
                             std::to_string(it->second.col) + "); expected a new name");
    return Status::success();
  }

  /// `ranks R`: the program runs on R ranks (docs/tensor-parallel.md); before any input.
  Status ranks_statement() {
    Token kw = next();  // `ranks`
    if (ranks_line_ > 0)
      return error_at(kw, "a second `ranks` statement (the first is at line " +
                              std::to_string(ranks_line_) + "); expected one at most");
    if (!g_.inputs().empty())
      return error_at(kw, "`ranks` after an input; expected `ranks R` before the first input");
    Token n = next();
    if (n.kind != TokKind::Int)
      return error_at(n, "found " + describe(n) + "; expected the number of ranks (ranks R)");
    if (n.int_value < 1 || n.int_value > kMaxRanks)
      return error_at(n, "ranks " + n.text + " is out of range; expected 1 to " +
                             std::to_string(kMaxRanks));
    STRATA_RETURN_IF_ERROR(expect_end());
    STRATA_RETURN_IF_ERROR(g_.set_ranks(static_cast<int>(n.int_value)));
    ranks_line_ = kw.line;
    return Status::success();
  }

  /// An optional `shard(dim=D)` (or `shard(D)`) after an input's dims or an output's name,
  /// for a tensor of rank `rank`: the dim (normalized), kReplicated when absent, and the
  /// `shard` token in *at.
  Result<int> shard_clause(int rank, Token* at) {
    if (!(peek().kind == TokKind::Ident && peek().text == "shard")) return kReplicated;
    *at = next();
    const std::string form = "shard(dim=D)";
    Token open = next();
    if (open.kind != TokKind::LParen)
      return error_at(open, "found " + describe(open) + " after `shard`; expected " + form);
    if (peek().kind == TokKind::Ident && peek().text == "dim" &&
        peek(1).kind == TokKind::Equals) {
      next();
      next();
    }
    Token d = next();
    if (d.kind != TokKind::Int || d.int_value < -rank || d.int_value >= rank)
      return error_at(d, "found " + describe(d) + " in `shard`; expected a dim index of the " +
                             std::to_string(rank) + "-dimensional tensor, -" +
                             std::to_string(rank) + " to " + std::to_string(rank - 1) + " (" +
                             form + ")");
    Token close = next();
    if (close.kind != TokKind::RParen)
      return error_at(close, "found " + describe(close) + "; expected `)` closing " + form);
    if (g_.ranks() < 2)
      return error_at(*at, "`shard` in a program without `ranks R` (R ≥ 2); expected `ranks R` "
                           "on a line before the first input");
    return static_cast<int>(d.int_value < 0 ? d.int_value + rank : d.int_value);
  }

  Status input_statement() {
    next();  // `input`
    Token name = next();
    STRATA_RETURN_IF_ERROR(check_new_name(name, "the input's name (input NAME: DTYPE[dims])"));
    Token colon = next();
    if (colon.kind != TokKind::Colon)
      return error_at(colon, "found " + describe(colon) +
                                 "; expected `:` after the input name (input NAME: DTYPE[dims])");
    Token dt = next();
    if (dt.kind != TokKind::Ident)
      return error_at(dt, "found " + describe(dt) + "; expected a dtype (f16, bf16 or f32)");
    auto dtype = parse_dtype(dt.text);
    if (!dtype) return error_at(dt, "unknown dtype `" + dt.text + "`; expected f16, bf16 or f32");
    Token open = next();
    if (open.kind != TokKind::LBracket)
      return error_at(open, "found " + describe(open) +
                                "; expected `[` and the dimensions after the dtype (like f16[16, "
                                "4096])");
    std::vector<int64_t> dims;
    while (true) {
      Token d = next();
      if (d.kind == TokKind::Int && d.int_value < 1)
        return error_at(d, "dimension " + d.text + " is not positive; expected an extent ≥ 1");
      if (d.kind != TokKind::Int)
        return error_at(d, "found " + describe(d) + "; expected a positive integer extent");
      if (static_cast<int>(dims.size()) == kMaxRank)
        return error_at(d, "found a dimension beyond the " + std::to_string(kMaxRank) +
                               "th; expected at most " + std::to_string(kMaxRank) + " dimensions");
      dims.push_back(d.int_value);
      Token sep = next();
      if (sep.kind == TokKind::RBracket) break;
      if (sep.kind != TokKind::Comma)
        return error_at(sep,
                        "found " + describe(sep) + "; expected `,` or `]` in the dimension list");
    }
    Token shard_tok;
    STRATA_ASSIGN_OR_RETURN(int shard, shard_clause(static_cast<int>(dims.size()), &shard_tok));
    STRATA_RETURN_IF_ERROR(expect_end());
    // The size bound (kMaxElements) is the one every loader shares (Shape::check).
    auto shape = Shape::make(dims);
    if (!shape.ok()) return error_at(name, "input `" + name.text + "`: " + shape.error().message);
    auto t = g_.add_input(name.text, *shape, *dtype);
    if (!t.ok()) return error_at(name, t.error().message);
    if (shard != kReplicated) {
      Status st = g_.set_input_shard(static_cast<int>(g_.inputs().size()) - 1, shard);
      if (!st.ok()) return error_at(shard_tok, st.error().message);
    }
    defs_[name.text] = {*t, name.line, name.col};
    return Status::success();
  }

  Status output_statement() {
    next();  // `output`
    while (true) {
      Token name = next();
      if (name.kind != TokKind::Ident)
        return error_at(name,
                        "found " + describe(name) + "; expected the name of a tensor to output");
      if (peek().kind == TokKind::LParen)
        return error_at(name, "found a call to `" + name.text +
                                  "` in an output statement; expected a tensor name (assign the "
                                  "call to a name first)");
      STRATA_ASSIGN_OR_RETURN(int t, lookup(name));
      auto st = g_.mark_output(t);
      if (!st.ok()) return error_at(name, st.error().message + "; expected each output once");
      Token shard_tok;
      STRATA_ASSIGN_OR_RETURN(int shard, shard_clause(g_.tensor(t).shape.rank(), &shard_tok));
      if (shard != kReplicated) {
        Status s = g_.set_output_shard(static_cast<int>(g_.outputs().size()) - 1, shard);
        if (!s.ok()) return error_at(shard_tok, s.error().message);
      } else if (rank_varying_tensors(g_)[t]) {
        return error_at(name, check_replicated_outputs(g_).error().message);
      }
      Token sep = next();
      if (sep.kind == TokKind::End) return Status::success();
      if (sep.kind != TokKind::Comma)
        return error_at(
            sep, "found " + describe(sep) + "; expected `,` or end of line after an output name");
    }
  }

  Status assignment() {
    Token name = next();
    STRATA_RETURN_IF_ERROR(check_new_name(name, "a tensor name"));
    next();  // `=`
    STRATA_ASSIGN_OR_RETURN(Expr rhs, parse_expr(0));
    if (!rhs.call)
      return error_at(rhs.tok, "found " + describe(rhs.tok) +
                                   "; expected an op call such as `exp(X)` (every assignment "
                                   "computes a new tensor)");
    STRATA_RETURN_IF_ERROR(expect_end());
    STRATA_ASSIGN_OR_RETURN(int t, evaluate(*rhs.call, name.text));
    defs_[name.text] = {t, name.line, name.col};
    return Status::success();
  }

  // ---- syntax ----

  Result<Expr> parse_expr(int depth) {
    Token t = next();
    if (t.kind == TokKind::Ident && peek().kind == TokKind::LParen) {
      STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Call> call, parse_call(std::move(t), depth + 1));
      Token op = call->op;
      return Expr{std::move(op), std::move(call)};
    }
    if (t.kind == TokKind::Ident || t.kind == TokKind::Int || t.kind == TokKind::Real)
      return Expr{std::move(t), nullptr};
    return error_at(t, "found " + describe(t) + "; expected a name, a number or an op call");
  }

  Result<std::unique_ptr<Call>> parse_call(Token op, int depth) {
    if (depth > kMaxNesting)
      return error_at(op, "call to `" + op.text + "` is nested more than " +
                              std::to_string(kMaxNesting) + " calls deep; expected at most " +
                              std::to_string(kMaxNesting) + " (name intermediate results)");
    auto call = std::make_unique<Call>();
    call->op = std::move(op);
    Token open = next();  // `(`
    std::string where =
        "the call to `" + call->op.text + "` opened at column " + std::to_string(open.col);
    if (peek().kind == TokKind::RParen) {
      next();
      return call;
    }
    while (true) {
      if (peek().kind == TokKind::End)
        return error_at(peek(), "found end of line inside " + where +
                                    "; expected an argument and `)` (unterminated call)");
      Arg arg;
      if (peek().kind == TokKind::Ident && peek(1).kind == TokKind::Equals) {
        arg.key = next();
        next();  // `=`
        if (peek().kind == TokKind::End)
          return error_at(peek(),
                          "found end of line after `" + arg.key->text + "=`; expected a value");
      }
      STRATA_ASSIGN_OR_RETURN(arg.value, parse_expr(depth));
      call->args.push_back(std::move(arg));
      Token sep = next();
      if (sep.kind == TokKind::RParen) return call;
      if (sep.kind == TokKind::End)
        return error_at(
            sep, "found end of line inside " + where + "; expected `,` or `)` (unterminated call)");
      if (sep.kind != TokKind::Comma)
        return error_at(sep,
                        "found " + describe(sep) + " inside " + where + "; expected `,` or `)`");
    }
  }

  // ---- meaning ----

  Result<int> lookup(const Token& name) {
    auto it = defs_.find(name.text);
    if (it != defs_.end()) return it->second.tensor;
    std::vector<std::string> known;
    for (const auto& [n, d] : defs_) known.push_back(n);
    return error_at(name, "undefined name `" + name.text +
                              "`; expected a tensor defined on an earlier line" +
                              did_you_mean(name.text, known));
  }

  Result<OpKind> resolve_op(const Token& op) {
    auto k = parse_op_kind(op.text);
    if (k && is_program_op(*k)) return *k;
    if (k && *k == OpKind::RunningMax)
      return error_at(op,
                      "`running_max` is a block-level op (the running max of a for-loop); "
                      "expected `max(x, dim)` in a program");
    if (k && *k == OpKind::Input)
      return error_at(op,
                      "`input` is a statement, not an op; expected `input NAME: "
                      "DTYPE[dims]` on its own line");
    if (k)
      return error_at(op, "`" + op.text +
                              "` is a μGraph op (customized kernels, block graphs), not a "
                              "program op; expected one of: " +
                              program_op_list());
    std::string hint = did_you_mean(op.text, program_op_names());
    return error_at(op, "unknown op `" + op.text + "`; expected " +
                            (hint.empty() ? "one of: " + program_op_list() : "a kernel op" + hint));
  }

  /// Binds a call's arguments to the op's signature, left to right.
  Result<std::vector<const Expr*>> bind(const Call& c, const std::vector<Param>& sig) {
    std::vector<const Expr*> bound(sig.size(), nullptr);
    const std::string op = "`" + c.op.text + "`";
    bool seen_keyword = false;
    size_t position = 0;
    for (const Arg& arg : c.args) {
      size_t idx = sig.size();
      if (arg.key) {
        seen_keyword = true;
        for (size_t i = 0; i < sig.size(); ++i)
          if (arg.key->text == sig[i].name ||
              (!sig[i].alias.empty() && arg.key->text == sig[i].alias))
            idx = i;
        if (idx == sig.size()) {
          std::string names;
          for (const Param& p : sig) {
            names += names.empty() ? "" : ", ";
            names += p.name;
            if (!p.alias.empty()) names += " (or " + std::string(p.alias) + ")";
          }
          return error_at(*arg.key, "unknown keyword argument `" + arg.key->text + "` for " + op +
                                        "; expected one of: " + names);
        }
        if (bound[idx])
          return error_at(*arg.key, "argument `" + std::string(sig[idx].name) + "` of " + op +
                                        " is given twice; expected it once");
      } else {
        if (seen_keyword)
          return error_at(arg.value.tok,
                          "found a positional argument after a keyword argument in the call to " +
                              op + "; expected `NAME=value`");
        if (position >= sig.size())
          return error_at(arg.value.tok, "found an extra argument in the call to " + op +
                                             "; expected " + std::to_string(sig.size()) +
                                             " at most: " + signature_text(c.op.text, sig));
        idx = position++;
      }
      bound[idx] = &arg.value;
    }
    int tensors = 0, given = 0;
    for (size_t i = 0; i < sig.size(); ++i)
      if (sig[i].type == ParamType::Tensor) {
        ++tensors;
        if (bound[i]) ++given;
      }
    if (given != tensors)
      return error_at(c.op, "found " + std::to_string(given) + " tensor argument" +
                                (given == 1 ? "" : "s") + " in the call to " + op + "; expected " +
                                std::to_string(tensors) + ": " + signature_text(c.op.text, sig));
    for (size_t i = 0; i < sig.size(); ++i)
      if (!bound[i] && sig[i].required)
        return error_at(c.op, "missing argument `" + std::string(sig[i].name) +
                                  "` in the call to " + op + "; expected " +
                                  signature_text(c.op.text, sig));
    return bound;
  }

  /// Sets the attribute of a non-tensor parameter from its argument.
  Status set_attr(const Param& p, const Expr& e, const std::string& op, OpAttrs& attrs) {
    std::string what = "argument `" + std::string(p.name) + "` of `" + op + "`";
    bool is_int = p.type == ParamType::Int;
    std::string expected = is_int ? "an integer" : "a number";
    if (e.call)
      return error_at(
          e.tok, "found a call to `" + e.tok.text + "` for " + what + "; expected " + expected);
    if (e.tok.kind == TokKind::Ident)
      return error_at(e.tok,
                      "found " + describe(e.tok) + " for " + what + "; expected " + expected);
    if (is_int && e.tok.kind != TokKind::Int)
      return error_at(e.tok,
                      "found " + describe(e.tok) + " for " + what + "; expected " + expected);
    if (p.field == AttrField::Dim && (e.tok.int_value < INT_MIN || e.tok.int_value > INT_MAX))
      return error_at(e.tok, "found dim " + e.tok.text + " for `" + op +
                                 "`; expected a dimension index of its input");
    if (is_int)
      set_int_attr(attrs, p.field, e.tok.int_value);
    else
      set_real_attr(attrs, p.field, e.tok.real_value);
    return Status::success();
  }

  /// Binds a call's arguments: evaluates its tensor arguments (in order) and sets the
  /// attributes of the others (defaults where not given).
  Status bind_args(const Call& c, const std::vector<Param>& sig, std::vector<int>& inputs,
                   OpAttrs& attrs) {
    STRATA_ASSIGN_OR_RETURN(std::vector<const Expr*> bound, bind(c, sig));
    for (size_t i = 0; i < sig.size(); ++i) {
      const Param& p = sig[i];
      const Expr* e = bound[i];
      if (p.type != ParamType::Tensor) {
        if (!e) {
          Token def;
          def.kind = TokKind::Int;
          def.int_value = static_cast<int64_t>(p.default_value);
          def.real_value = p.default_value;
          Expr dflt{def, nullptr};
          STRATA_RETURN_IF_ERROR(set_attr(p, dflt, c.op.text, attrs));
        } else {
          STRATA_RETURN_IF_ERROR(set_attr(p, *e, c.op.text, attrs));
        }
        continue;
      }
      if (e->call) {
        STRATA_ASSIGN_OR_RETURN(int t, evaluate(*e->call, ""));
        inputs.push_back(t);
      } else if (e->tok.kind == TokKind::Ident) {
        STRATA_ASSIGN_OR_RETURN(int t, lookup(e->tok));
        inputs.push_back(t);
      } else {
        return error_at(e->tok, "found " + describe(e->tok) + " for tensor argument `" +
                                    std::string(p.name) + "` of `" + c.op.text +
                                    "`; expected a tensor name or an op call");
      }
    }
    return Status::success();
  }

  /// Adds one op of a call (or of a composite's expansion) at the call's location.
  Result<int> add(const Call& c, OpKind kind, std::vector<int> inputs, const OpAttrs& attrs,
                  const std::vector<Param>& sig, const std::string& name) {
    auto t = g_.add_op(kind, std::move(inputs), attrs, name);
    if (!t.ok()) {
      std::string why = strip_ir_location(t.error().message, op_name(kind));
      // The IR states its rule as "... (expected R)"; the parser's format is "...; expected R".
      size_t paren = why.rfind(" (expected ");
      if (paren != std::string::npos && why.back() == ')') {
        why = why.substr(0, paren) + "; " + why.substr(paren + 2, why.size() - paren - 3);
      } else if (why.find("; expected") == std::string::npos) {
        why +=
            "; expected operands that satisfy the shape rules of " + signature_text(c.op.text, sig);
      }
      return error_at(c.op, "invalid operands for `" + c.op.text + "`: " + why);
    }
    return *t;
  }

  /// Expands a composite op into table ops; the last one gets `name`.
  Result<int> expand(const Call& c, const Composite& comp, const std::string& name) {
    std::vector<int> in;
    OpAttrs attrs;
    STRATA_RETURN_IF_ERROR(bind_args(c, comp.params, in, attrs));
    const int x = in[0];
    auto dim = g_.tensor(x).shape.normalize_dim(attrs.dim);
    if (!dim)
      return error_at(c.op, "invalid operands for `" + c.op.text + "`: dim " +
                                std::to_string(attrs.dim) + " is out of range for " +
                                g_.tensor(x).shape.str());
    OpAttrs red;
    red.dim = *dim;
    auto op = [&](OpKind k, std::vector<int> ins, const OpAttrs& a, const std::string& n = "") {
      return add(c, k, std::move(ins), a, comp.params, n);
    };
    if (comp.name == "softmax") {
      STRATA_ASSIGN_OR_RETURN(int m, op(OpKind::Max, {x}, red));
      STRATA_ASSIGN_OR_RETURN(int d, op(OpKind::Sub, {x, m}, {}));
      STRATA_ASSIGN_OR_RETURN(int e, op(OpKind::Exp, {d}, {}));
      STRATA_ASSIGN_OR_RETURN(int z, op(OpKind::Sum, {e}, red));
      return op(OpKind::Div, {e, z}, {}, name);
    }
    // layer_norm
    STRATA_ASSIGN_OR_RETURN(int mu, op(OpKind::Mean, {x}, red));
    STRATA_ASSIGN_OR_RETURN(int d, op(OpKind::Sub, {x, mu}, {}));
    STRATA_ASSIGN_OR_RETURN(int sq, op(OpKind::Square, {d}, {}));
    STRATA_ASSIGN_OR_RETURN(int var, op(OpKind::Mean, {sq}, red));
    int v = var;
    if (attrs.scalar != 0.0) {
      OpAttrs eps;
      eps.scalar = attrs.scalar;
      STRATA_ASSIGN_OR_RETURN(v, op(OpKind::AddScalar, {var}, eps));
    }
    STRATA_ASSIGN_OR_RETURN(int sd, op(OpKind::Sqrt, {v}, {}));
    return op(OpKind::Div, {d, sd}, {}, name);
  }

  /// Builds a call's op (after its arguments) and returns its output tensor; `name` names
  /// the output of an assignment's outermost call.
  Result<int> evaluate(const Call& c, const std::string& name) {
    if (const Composite* comp = find_composite(c.op.text)) return expand(c, *comp, name);
    STRATA_ASSIGN_OR_RETURN(OpKind kind, resolve_op(c.op));
    std::vector<Param> sig = signature(kind);
    OpAttrs attrs;
    std::vector<int> inputs;
    STRATA_RETURN_IF_ERROR(bind_args(c, sig, inputs, attrs));
    return add(c, kind, std::move(inputs), attrs, sig, name);
  }

  /// Unnamed intermediate tensors print and serialize as "t<id>"; a user name of that form
  /// would make two tensors share a name in the μGraph JSON.
  Status check_generated_names() const {
    for (size_t id = 0; id < g_.tensors().size(); ++id) {
      if (!g_.tensor(static_cast<int>(id)).name.empty()) continue;
      auto it = defs_.find("t" + std::to_string(id));
      if (it == defs_.end()) continue;
      return frontend::located_error(
          file_, it->second.line, it->second.col,
          "name `" + it->first +
              "` is also the generated name of an unnamed intermediate tensor "
              "(the result of a nested call); expected a different name");
    }
    return Status::success();
  }

  std::string file_;
  int ranks_line_ = 0;  ///< the line of the `ranks` statement, 0 if none
  KernelGraph g_;
  std::map<std::string, Def> defs_;
  std::vector<Token> toks_;
  size_t pos_ = 0;
};

}  // namespace

Result<KernelGraph> parse_program(std::string_view text, const std::string& filename) {
  text = skip_utf8_bom(text);  // editors may write one; columns count from after it
  ProgramParser parser(filename);
  return parser.run(text);
}

bool is_program_op(OpKind kind) {
  return (op_info(kind).levels & kKernel) && kind != OpKind::Input && kind != OpKind::Customized;
}

std::vector<ProgramParam> program_op_signature(OpKind kind) {
  std::vector<ProgramParam> out;
  if (!is_program_op(kind)) return out;
  for (const Param& p : signature(kind)) {
    ProgramParam q;
    q.name = std::string(p.name);
    q.kind = p.type == ParamType::Tensor ? ProgramParam::Kind::Tensor
             : p.type == ParamType::Int  ? ProgramParam::Kind::Int
                                         : ProgramParam::Kind::Real;
    q.required = p.required;
    q.default_value = p.default_value;
    q.alias = std::string(p.alias);
    out.push_back(std::move(q));
  }
  return out;
}

std::string program_op_signature_text(OpKind kind) {
  return signature_text(op_name(kind), signature(kind));
}

namespace {

std::vector<ProgramParam> public_params(const std::vector<Param>& sig) {
  std::vector<ProgramParam> out;
  for (const Param& p : sig) {
    ProgramParam q;
    q.name = std::string(p.name);
    q.kind = p.type == ParamType::Tensor ? ProgramParam::Kind::Tensor
             : p.type == ParamType::Int  ? ProgramParam::Kind::Int
                                         : ProgramParam::Kind::Real;
    q.required = p.required;
    q.default_value = p.default_value;
    q.alias = std::string(p.alias);
    out.push_back(std::move(q));
  }
  return out;
}

}  // namespace

std::vector<std::string> program_composite_names() {
  std::vector<std::string> out;
  for (const Composite& c : composites()) out.emplace_back(c.name);
  return out;
}

std::vector<ProgramParam> program_composite_signature(std::string_view name) {
  const Composite* c = find_composite(name);
  return c ? public_params(c->params) : std::vector<ProgramParam>{};
}

std::string program_composite_signature_text(std::string_view name) {
  const Composite* c = find_composite(name);
  return c ? signature_text(c->name, c->params) : "";
}

}  // namespace strata
