// Emitter: after the work (declared in internal.h). Stores staged in a shared tile are written
// back coalesced along idy, `vector` elements per store where aligned; the atomicAdds to one
// address are summed per block (warp shuffles, then the warps' sums), one atomic per block.
// Must not: decide which stores are staged (plan.cpp: staged_store_site).
#include <algorithm>
#include <sstream>
#include <string>

#include "variants/naive/internal.h"

namespace gputune::naive {

std::string Emitter::sum_key(const Stmt& r) const {
  return k_.params[r.target].name + "|" + literal_text(r.address);
}

/// The block sum a Reduce statement adds to in this variant, or -1 (a plain atomicAdd).
int Emitter::sum_of(const Stmt& r) const {
  std::string key = sum_key(r);
  for (size_t i = 0; i < sums_.size(); ++i)
    if (sums_[i].key == key) return static_cast<int>(i);
  return -1;
}

std::string Emitter::store_tile(int site) const {
  return "gt_w_" + k_.params[k_.accesses[site].param].name;
}

bool Emitter::staged_store(int site) const {
  return std::find(store_sites_.begin(), store_sites_.end(), site) != store_sites_.end();
}

/// Elements per write-back store of a staged store: `vector` when its 4-byte elements fill the
/// tile's rows evenly (each thread then stores `vector` consecutive idy at once), else 1.
int Emitter::store_vector(int site) const {
  const Param& prm = k_.params[static_cast<size_t>(k_.accesses[static_cast<size_t>(site)].param)];
  return c_.vector > 1 && ty_ % c_.vector == 0 && element_bytes(prm.element) == 4 ? c_.vector : 1;
}

/// After the work: the stores staged in a tile go out with consecutive threads along idy; with
/// a vector width, `vector` consecutive elements per thread as one float2/float4 store where
/// all of them pass the bounds check and the address is aligned (the tile row always is: its
/// pitch is a multiple of the width), one by one otherwise.
void Emitter::write_back(std::ostringstream& o, int site) {
  const int v = store_vector(site);
  const std::string n = std::to_string(c_.block_x * c_.block_y), per_row = std::to_string(ty_ / v);
  const std::string& array = k_.params[k_.accesses[site].param].name;
  line(o, "__syncthreads();");
  line(o, "// write " + array + " back from the tile: consecutive threads along " +
              k_.index_names[1] + " store consecutive elements" +
              (v > 1 ? ", " + std::to_string(v) + " per store where aligned" : ""));
  line(o, "for (int gt_e = gt_tid; gt_e < " +
              std::to_string(static_cast<long long>(tx_) * ty_ / v) + "; gt_e += " + n + ") {");
  ++ind_;
  line(o, "const int gt_t0 = gt_e / " + per_row + ", gt_t1 = gt_e % " + per_row +
              (v > 1 ? " * " + std::to_string(v) : "") + ";");
  const std::string cond = guard_text();
  const std::string tile = store_tile(site) + "[gt_t0][gt_t1";
  auto at = [&](const std::string& j) {
    line(o, "const int " + k_.index_names[0] + " = gt_bx + gt_t0;");
    line(o, "const int " + k_.index_names[1] + " = gt_by + gt_t1" + j + ";");
  };
  if (v == 1) {
    at("");
    const std::string store = array + "[" + render_index(site) + "] = " + tile + "];";
    line(o, cond.empty() ? store : "if (" + cond + ") " + store);
  } else {
    const std::string vt =
        strip_const(k_.params[k_.accesses[site].param].element) + std::to_string(v);
    vector_or_elements(
        o, v, cond.empty() ? "true" : cond, at,
        k_.params[k_.accesses[site].param].element + "* gt_p = &" + array + "[" +
            render_index(site) + "];",
        4 * v,
        [&] {
          line(o, "*reinterpret_cast<" + vt + "*>(gt_p) = *reinterpret_cast<const " + vt + "*>(&" +
                      tile + "]);");
        },
        [&] {
          const std::string store = array + "[" + render_index(site) + "] = " + tile + " + gt_j];";
          line(o, cond.empty() ? store : "if (" + cond + ") " + store);
        });
  }
  --ind_;
  line(o, "}");
}

/// After the work: the threads' parts summed within each warp by a butterfly of shuffles, the
/// warps' sums through shared memory and summed again by shuffles (every warp does it: a
/// shuffle needs the whole warp), one atomicAdd per block.
void Emitter::block_sum(std::ostringstream& o, const Sum& x) {
  const int n = lb_[0] * lb_[1], warps = n / 32;
  const std::string buf = "gt_red" + x.name.substr(6), v = "gt_v" + x.name.substr(6);
  const std::string& t = x.stmt->element;
  line(o, "// sum the block's parts: each warp by shuffles, then the " + std::to_string(warps) +
              " warps' sums; one atomicAdd per block");
  line(o, t + " " + v + " = " + x.name + ";");
  line(o, "#pragma unroll");
  line(o, "for (int gt_o = 16; gt_o > 0; gt_o >>= 1) " + v + " += __shfl_xor_sync(0xffffffffu, " +
              v + ", gt_o);");
  if (warps > 1) {
    line(o, "__shared__ " + t + " " + buf + "[" + std::to_string(warps) + "];  // one per warp");
    line(o, "if (gt_tid % 32 == 0) " + buf + "[gt_tid / 32] = " + v + ";");
    line(o, "__syncthreads();");
    line(o, v + " = gt_tid % 32 < " + std::to_string(warps) + " ? " + buf + "[gt_tid % 32] : " + t +
                "(0);");
    line(o, "#pragma unroll");
    line(o, "for (int gt_o = 16; gt_o > 0; gt_o >>= 1) " + v + " += __shfl_xor_sync(0xffffffffu, " +
                v + ", gt_o);");
  }
  line(o, "if (gt_tid == 0) atomicAdd(" + render(x.stmt->address) + ", " + v + ");");
}

}  // namespace gputune::naive
