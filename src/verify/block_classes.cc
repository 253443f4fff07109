#include "verify/block_classes.h"

#include <array>

#include "strata/ir/dim_links.h"

namespace strata::verify {

BlockClasses block_classes(const BlockGraph& b, const std::vector<std::vector<int>>& operands,
                           int classes) {
  BlockClasses r;
  r.uniform.assign(classes, true);
  r.axis.assign(classes, -1);
  auto bad = [&](int c) {
    if (c >= 0) r.uniform[c] = false;
  };
  const std::vector<BlockTensor>& ts = b.tensors();
  r.labels.resize(ts.size());
  for (size_t t = 0; t < ts.size(); ++t) r.labels[t].assign(ts[t].shape.rank(), -1);

  // The grid and the loop, from the input iterators: per class the axis that maps its dims
  // (−1 none, −2 not seen), per axis the class it maps (−2 not seen); the loop's class.
  std::vector<int> axis(classes, -2);
  std::array<int, 3> axis_class{-2, -2, -2};
  std::vector<int64_t> part(classes, 0);  // per class: its tile extent (per iteration if looped)
  std::vector<bool> cut(classes, false);  // a for-loop split is along the class
  int loop = -2;
  bool loop_mixed = false;
  for (int k = 0; k < b.num_inputs(); ++k) {
    const BlockOp& in = b.op(b.input_op(k));
    const std::vector<int>& li = operands[k];
    const Shape& tile = ts[in.output].shape;
    for (int a = 0; a < 3; ++a) {
      const int d = in.attrs.imap[a];
      if (d == kReplicate) continue;
      const int c = li[d];
      if (axis_class[a] == -2) {
        axis_class[a] = c;
      } else if (axis_class[a] != c) {
        bad(axis_class[a]);
        bad(c);
      }
    }
    for (int d = 0; d < static_cast<int>(li.size()); ++d) {
      const int c = li[d];
      if (c < 0) continue;
      int a = -1;
      for (int x = 0; x < 3; ++x)
        if (in.attrs.imap[x] == d) a = x;
      if (axis[c] == -2) axis[c] = a;
      else if (axis[c] != a) bad(c);
      if (part[c] == 0) part[c] = tile[d];
      else if (part[c] != tile[d]) bad(c);
    }
    if (b.forloop() > 1 && in.attrs.fmap != kReplicate) {
      const int c = li[in.attrs.fmap];
      if (loop == -2) loop = c;
      else if (loop != c) loop_mixed = true;
      if (c >= 0) cut[c] = true;
    }
  }
  // A loop over a class iterates over it alone, and cuts every operand that has it, evenly.
  if (loop_mixed || loop < 0) {
    for (int c = 0; c < classes; ++c)
      if (cut[c]) bad(c);
    loop = -1;
  } else {
    for (int k = 0; k < b.num_inputs(); ++k) {
      const std::vector<int>& li = operands[k];
      for (int d = 0; d < static_cast<int>(li.size()); ++d)
        if (li[d] == loop && b.op(b.input_op(k)).attrs.fmap != d) bad(loop);
    }
    if (b.ragged_loop() || b.loop_extent() != part[loop] * b.forloop()) bad(loop);
  }
  r.loop_class = loop;
  for (int c = 0; c < classes; ++c) {
    r.axis[c] = axis[c] >= 0 ? axis[c] : -1;
    if (axis[c] != -2 && part[c] < 2) bad(c);  // a tile dim of extent 1 would broadcast
  }

  // The ops, by the rules of the program's ops; accumulators and running ops by the loop's.
  for (const BlockOp& op : b.ops()) {
    if (op.kind == OpKind::Input) {
      r.labels[op.output] = operands[op.attrs.input_index];
      continue;
    }
    if (op.kind == OpKind::Output) continue;
    std::vector<Shape> shapes;
    for (int t : op.inputs) shapes.push_back(ts[t].shape);
    std::vector<int>& lo = r.labels[op.output];
    auto links = dim_links(op.kind, op.attrs, shapes, ts[op.output].shape);
    if (!links) {
      for (int t : op.inputs)
        for (int c : r.labels[t]) bad(c);
      continue;
    }
    // accum concatenating the iterations of a loop over a class along that class's dim.
    const bool concat_loop = op.kind == OpKind::AccumSum && op.attrs.fmap != kReplicate &&
                             loop >= 0 && r.labels[op.inputs[0]][op.attrs.fmap] == loop;
    if (loop >= 0 && (op_category(op.kind) == Category::Scan ||
                      (op_category(op.kind) == Category::Accum && !concat_loop)))
      bad(loop);  // it combines iterations, i.e. different indices of the loop's class
    for (int d = 0; d < static_cast<int>(lo.size()); ++d) {
      int common = -2;
      bool conflict = false;
      for (auto [i, di] : links->aligned[d]) {
        const int c = r.labels[op.inputs[i]][di];
        if (common == -2) common = c;
        else if (common != c) conflict = true;
      }
      if (conflict) {
        for (auto [i, di] : links->aligned[d]) bad(r.labels[op.inputs[i]][di]);
        common = -1;
      }
      lo[d] = common < 0 ? -1 : common;
    }
    for (auto [i, di] : links->forbidden_in)
      if (!(concat_loop && i == 0 && di == op.attrs.fmap)) bad(r.labels[op.inputs[i]][di]);
    for (int d : links->forbidden_out) lo[d] = concat_loop && d == op.attrs.fmap ? loop : -1;
  }

  // Every tile dim of a class has the class's part: one iteration's in a loop tile of a loop
  // over the class, one block's otherwise.
  for (size_t t = 0; t < ts.size(); ++t)
    for (int d = 0; d < ts[t].shape.rank(); ++d) {
      const int c = r.labels[t][d];
      if (c < 0) continue;
      const int64_t want =
          c == loop && ts[t].stage == Stage::Post ? part[c] * b.forloop() : part[c];
      if (ts[t].shape[d] != want) bad(c);
    }

  // The savers place every index where the operands' tiles had it: the class's dim by the
  // class's axis (or by none), and the axis places only the class's dim.
  for (int o = 0; o < b.num_outputs(); ++o) {
    const BlockOp& s = b.op(b.output_op(o));
    const std::vector<int>& sl = r.labels[s.inputs[0]];
    for (int d = 0; d < static_cast<int>(sl.size()); ++d) {
      const int c = sl[d];
      if (c < 0) continue;
      int placed = -1;
      for (int a = 0; a < 3; ++a)
        if (s.attrs.omap[a] == d) placed = a;
      if (placed != r.axis[c]) bad(c);
    }
    for (int a = 0; a < 3; ++a) {
      const int d = s.attrs.omap[a];
      if (d != kReplicate && axis_class[a] >= 0 && sl[d] != axis_class[a]) bad(axis_class[a]);
    }
  }
  return r;
}

}  // namespace strata::verify
