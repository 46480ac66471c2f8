#include "tuner/measure/arguments.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include "variants/expr.h"
#include "variants/instantiate.h"

namespace gputune::tuner {

ElementType parse_element_type(const std::string& t) {
  std::string base = t;
  int comps = 1;
  for (const char* b : {"half", "float", "double"}) {
    std::string bs(b);
    if (t.rfind(bs, 0) == 0 && t.size() > bs.size()) {
      base = bs;
      comps = std::stoi(t.substr(bs.size()));
    }
  }
  static const std::pair<const char*, ElementType> table[] = {
      {"bool", {ScalarKind::Bool, 1, 1}},  {"int8", {ScalarKind::I8, 1, 1}},
      {"uint8", {ScalarKind::U8, 1, 1}},   {"int16", {ScalarKind::I16, 1, 2}},
      {"uint16", {ScalarKind::U16, 1, 2}}, {"int32", {ScalarKind::I32, 1, 4}},
      {"uint32", {ScalarKind::U32, 1, 4}}, {"int64", {ScalarKind::I64, 1, 8}},
      {"uint64", {ScalarKind::U64, 1, 8}}, {"half", {ScalarKind::F16, 1, 2}},
      {"float", {ScalarKind::F32, 1, 4}},  {"double", {ScalarKind::F64, 1, 8}},
      {"int", {ScalarKind::I32, 1, 4}}};
  for (auto& [name, et] : table)
    if (base == name) {
      ElementType r = et;
      r.components = comps;
      return r;
    }
  throw std::invalid_argument("unknown element type '" + t + "'");
}

namespace {

std::uint16_t float_to_half(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, 4);
  std::uint32_t sign = (x >> 16) & 0x8000u;
  int exp = static_cast<int>((x >> 23) & 0xff) - 127 + 15;
  std::uint32_t mant = x & 0x7fffffu;
  if (((x >> 23) & 0xff) == 0xff)
    return static_cast<std::uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0));
  if (exp >= 31) return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return static_cast<std::uint16_t>(sign);
    mant |= 0x800000u;
    std::uint32_t shift = static_cast<std::uint32_t>(14 - exp);
    std::uint32_t h = mant >> shift;
    if ((mant >> (shift - 1)) & 1u) ++h;
    return static_cast<std::uint16_t>(sign | h);
  }
  std::uint32_t h = sign | (static_cast<std::uint32_t>(exp) << 10) | (mant >> 13);
  if (mant & 0x1000u) ++h;  // round half up
  return static_cast<std::uint16_t>(h);
}

float half_to_float(std::uint16_t h) {
  std::uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu, x;
  if (exp == 0) {
    if (mant == 0)
      x = sign;
    else {
      exp = 127 - 15 + 1;
      while (!(mant & 0x400u)) mant <<= 1, --exp;
      x = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

template <typename T>
void put(unsigned char* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

/// Whether `v` converts to `kind` without undefined behaviour: an integer type's range (a value
/// beyond it, as a problem size past 2^31 given to an int32 scalar, would not reach the kernel
/// as written: UBSan's report in the checking build), anything for bool and the float types.
bool fits(ScalarKind kind, double v) {
  auto in = [v](auto lo, auto hi) {
    return v > static_cast<double>(lo) - 1 && v < static_cast<double>(hi) + 1;
  };
  switch (kind) {
    case ScalarKind::I8:
      return in(INT8_MIN, INT8_MAX);
    case ScalarKind::U8:
      return in(0, UINT8_MAX);
    case ScalarKind::I16:
      return in(INT16_MIN, INT16_MAX);
    case ScalarKind::U16:
      return in(0, UINT16_MAX);
    case ScalarKind::I32:
      return in(INT32_MIN, INT32_MAX);
    case ScalarKind::U32:
      return in(0, UINT32_MAX);
    case ScalarKind::I64:  // 2^63 is the first double past INT64_MAX
      return v >= -0x1p63 && v < 0x1p63;
    case ScalarKind::U64:
      return v > -1 && v < 0x1p64;
    default:
      return true;
  }
}

void write_scalar(const ElementType& t, unsigned char* data, std::uint64_t i, double v) {
  unsigned char* p = data + i * static_cast<std::uint64_t>(t.scalar_bytes);
  switch (t.kind) {
    case ScalarKind::Bool:
      put<std::uint8_t>(p, v != 0);
      break;
    case ScalarKind::I8:
      put(p, static_cast<std::int8_t>(v));
      break;
    case ScalarKind::U8:
      put(p, static_cast<std::uint8_t>(v));
      break;
    case ScalarKind::I16:
      put(p, static_cast<std::int16_t>(v));
      break;
    case ScalarKind::U16:
      put(p, static_cast<std::uint16_t>(v));
      break;
    case ScalarKind::I32:
      put(p, static_cast<std::int32_t>(v));
      break;
    case ScalarKind::U32:
      put(p, static_cast<std::uint32_t>(v));
      break;
    case ScalarKind::I64:
      put(p, static_cast<std::int64_t>(v));
      break;
    case ScalarKind::U64:
      put(p, static_cast<std::uint64_t>(v));
      break;
    case ScalarKind::F16:
      put(p, float_to_half(static_cast<float>(v)));
      break;
    case ScalarKind::F32:
      put(p, static_cast<float>(v));
      break;
    case ScalarKind::F64:
      put(p, v);
      break;
  }
}

template <typename T>
T get(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

/// A BinaryRaw file's path (relative to the job file), checked to hold exactly `bytes`.
std::filesystem::path raw_file(const Job& job, const std::string& field, const std::string& file,
                               std::uint64_t bytes) {
  auto path = std::filesystem::path(file).is_absolute() ? std::filesystem::path(file)
                                                        : job.file.parent_path() / file;
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec)
    throw JobError(job.file.string(), field, "cannot read '" + path.string() + "'",
                   "give a path relative to the job file");
  if (size != bytes)
    throw JobError(job.file.string(), field,
                   "'" + path.string() + "' has " + std::to_string(size) +
                       " bytes, the argument needs " + std::to_string(bytes),
                   "write exactly Size x element-size bytes");
  return path;
}

std::vector<unsigned char> read_raw(const Job& job, const std::string& field,
                                    const std::string& file, std::uint64_t bytes) {
  const auto path = raw_file(job, field, file, bytes);
  std::ifstream in(path, std::ios::binary);
  std::vector<unsigned char> data(bytes);
  if (!in || !in.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(bytes)))
    throw JobError(job.file.string(), field, "cannot read '" + path.string() + "'",
                   "give a path relative to the job file");
  return data;
}

}  // namespace

double read_scalar(const ElementType& t, const unsigned char* data, std::uint64_t i) {
  const unsigned char* p = data + i * static_cast<std::uint64_t>(t.scalar_bytes);
  switch (t.kind) {
    case ScalarKind::Bool:
      return get<std::uint8_t>(p) ? 1 : 0;
    case ScalarKind::I8:
      return get<std::int8_t>(p);
    case ScalarKind::U8:
      return get<std::uint8_t>(p);
    case ScalarKind::I16:
      return get<std::int16_t>(p);
    case ScalarKind::U16:
      return get<std::uint16_t>(p);
    case ScalarKind::I32:
      return get<std::int32_t>(p);
    case ScalarKind::U32:
      return get<std::uint32_t>(p);
    case ScalarKind::I64:
      return static_cast<double>(get<std::int64_t>(p));
    case ScalarKind::U64:
      return static_cast<double>(get<std::uint64_t>(p));
    case ScalarKind::F16:
      return half_to_float(get<std::uint16_t>(p));
    case ScalarKind::F32:
      return get<float>(p);
    case ScalarKind::F64:
      return get<double>(p);
  }
  return 0;
}

const std::vector<unsigned char>* expected_output(
    const std::vector<HostArgument>& args, size_t i,
    const std::vector<std::vector<unsigned char>>* captured) {
  if (!args[i].reference.empty()) return &args[i].reference;
  if (captured && i < captured->size() && !(*captured)[i].empty()) return &(*captured)[i];
  return nullptr;
}

void check_parameter_sizes(const Job& job, const std::vector<int>& sizes,
                           const std::string& config) {
  const std::string where = " (the cubin of configuration " + config + ")";
  if (sizes.size() != job.arguments.size())
    throw JobError(job.file.string(), "KernelSpecification.Arguments",
                   "the job lists " + std::to_string(job.arguments.size()) +
                       " arguments, kernel '" + job.kernel_name + "' takes " +
                       std::to_string(sizes.size()) + where,
                   kArgumentListFix);
  for (size_t i = 0; i < sizes.size(); ++i) {
    const Argument& a = job.arguments[i];
    const bool vector = a.memory_type == "Vector";
    const int bytes = vector ? 8 : parse_element_type(a.type).bytes();
    if (bytes == sizes[i]) continue;
    throw JobError(job.file.string(),
                   "KernelSpecification.Arguments[" + std::to_string(i) + "] (" + a.name + ")",
                   (vector ? std::string("a Vector is passed as an 8-byte device pointer")
                           : "a Scalar " + a.type + " is " + std::to_string(bytes) + " bytes") +
                       ", but parameter " + std::to_string(i) + " of kernel '" + job.kernel_name +
                       "' is " + std::to_string(sizes[i]) + " bytes" + where,
                   kArgumentListFix);
  }
}

std::uint64_t available_memory_bytes() {
  std::uint64_t avail = 0;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string key; meminfo >> key;) {
    std::uint64_t kb = 0;
    meminfo >> kb;
    if (key == "MemAvailable:") {
      avail = kb * 1024;
      break;
    }
    meminfo.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  std::ifstream max_file("/sys/fs/cgroup/memory.max"),
      current_file("/sys/fs/cgroup/memory.current");
  std::string max_text;
  std::uint64_t current = 0;
  if (max_file >> max_text && max_text != "max" && current_file >> current) {
    try {
      const std::uint64_t limit = std::stoull(max_text);
      const std::uint64_t left = limit > current ? limit - current : 0;
      if (avail == 0 || left < avail) avail = left;
    } catch (const std::exception&) {  // unreadable: MemAvailable alone
    }
  }
  return avail;
}

void check_argument_memory(const Job& job, const ContextSpec& ctx,
                           const std::vector<HostArgument>& sized, std::uint64_t available,
                           const std::string& where, const std::string& fix) {
  std::uint64_t total = 0, largest = 0;
  size_t largest_at = 0;
  for (size_t i = 0; i < sized.size(); ++i) {
    if (!sized[i].is_vector) continue;
    const std::uint64_t bytes = sized[i].elements *
                                static_cast<std::uint64_t>(sized[i].type.components) *
                                static_cast<std::uint64_t>(sized[i].type.scalar_bytes);
    total += bytes;
    if (bytes > largest) largest = bytes, largest_at = i;
  }
  if (available == 0 || total <= available) return;
  throw JobError(job.file.string(), "KernelSpecification.Arguments",
                 "the arguments need " + std::to_string(total) + " bytes in context " + ctx.name +
                     " (the largest, Arguments[" + std::to_string(largest_at) + "] (" +
                     sized[largest_at].name + "), " + std::to_string(largest) +
                     "), more than the " + std::to_string(available) + " bytes " + where,
                 fix);
}

std::vector<HostArgument> make_arguments(const Job& job, const ContextSpec& ctx,
                                         ArgumentContents contents) {
  const bool fill_vectors = contents == ArgumentContents::Filled;
  // Sizes see each parameter as the list of its values (buffers serve every configuration).
  auto bindings = context_bindings(ctx);
  for (auto& p : job.parameters) bindings.emplace_back(p.name, Value(p.values));
  auto eval = [&](const std::string& e, const std::string& field) {
    try {
      return eval_expression(e, bindings);
    } catch (const ExprError& err) {
      throw JobError(job.file.string(), field, err.what(),
                     "use ProblemSize[i], context Values or parameter value lists");
    }
  };
  // A vector's bytes, checked before multiplying (no wrap-around).
  // A FillValue (an argument's or a reference's) that its integer type `type` cannot hold.
  auto require_fits = [&](const std::string& path, ScalarKind kind, const std::string& type,
                          double v) {
    if (!fits(kind, v))
      throw JobError(job.file.string(), path + ".FillValue",
                     "evaluates to " + Value(v).repr() + " in context " + ctx.name +
                         ", which does not fit in its Type " + type,
                     "give a value the type holds, or a wider Type (e.g. int64)");
  };
  auto vector_bytes = [&](const std::string& path, std::uint64_t elements, std::uint64_t element) {
    constexpr std::uint64_t kMaxBytes = std::uint64_t{1} << 40;
    if (elements > kMaxBytes / element)
      throw JobError(job.file.string(), path + ".Size",
                     std::to_string(elements) + " elements of " + std::to_string(element) +
                         " bytes in context " + ctx.name + " are more than 1 TiB",
                     "use a smaller size");
    return elements * element;
  };
  // Every vector's bytes, before any is allocated: sized first (which checks each size).
  if (fill_vectors)
    check_argument_memory(job, ctx, make_arguments(job, ctx, ArgumentContents::SizesOnly),
                          available_memory_bytes(), "of memory this machine has available",
                          "use a smaller problem size (or a smaller --size with gputune check)");
  std::vector<HostArgument> out;
  for (size_t i = 0; i < job.arguments.size(); ++i) {
    const Argument& a = job.arguments[i];
    std::string path = "KernelSpecification.Arguments[" + std::to_string(i) + "] (" + a.name + ")";
    HostArgument h;
    h.name = a.name;
    h.type = parse_element_type(a.type);
    h.is_vector = a.memory_type == "Vector";
    h.output = a.output;
    h.written = a.access != "ReadOnly";
    Value size = h.is_vector ? eval(a.size_expr, path + ".Size") : Value(1);
    if (!(size.is_int() || size.is_bool()) || size.as_int() < 1)
      throw JobError(job.file.string(), path + ".Size",
                     "evaluates to " + size.repr() + " in context " + ctx.name,
                     "give a positive integer number of elements");
    h.elements = static_cast<std::uint64_t>(size.as_int());
    const auto element_bytes = static_cast<std::uint64_t>(h.type.components * h.type.scalar_bytes);
    const std::uint64_t bytes = vector_bytes(path, h.elements, element_bytes);
    std::uint64_t scalars = h.elements * static_cast<std::uint64_t>(h.type.components);
    const bool fill = fill_vectors || model_reads_contents(h);
    if (a.fill_type == "BinaryRaw") {
      // Sized only: the file is checked, not read (it may be large, and is read when filling).
      if (h.is_vector && !fill)
        raw_file(job, path + ".DataSource", a.data_source, bytes);
      else
        h.data = read_raw(job, path + ".DataSource", a.data_source, bytes);
    } else {
      double fill_value = eval(a.fill_value, path + ".FillValue").as_double();
      // Constant: the value itself; Random: values in [0, FillValue)
      require_fits(path, h.type.kind, a.type, fill_value);
      if (h.is_vector && !fill) {
        out.push_back(std::move(h));
        continue;
      }
      try {
        h.data.assign(bytes, 0);
      } catch (const std::bad_alloc&) {
        throw JobError(job.file.string(), path + ".Size",
                       "needs " + std::to_string(bytes) + " bytes in context " + ctx.name +
                           ", more than this machine can allocate",
                       "use a smaller size");
      }
      if (a.fill_type == "Constant") {
        for (std::uint64_t k = 0; k < scalars; ++k)
          write_scalar(h.type, h.data.data(), k, fill_value);
      } else {  // Random: uniform in [0, FillValue), reproducible per argument
        std::mt19937_64 rng(a.seed.value_or(job.seed * 1000003u + i));
        bool integral = h.type.kind != ScalarKind::F16 && h.type.kind != ScalarKind::F32 &&
                        h.type.kind != ScalarKind::F64;
        std::uniform_real_distribution<double> dist(0.0, fill_value == 0 ? 1.0 : fill_value);
        for (std::uint64_t k = 0; k < scalars; ++k) {
          double v = dist(rng);
          write_scalar(h.type, h.data.data(), k, integral ? std::floor(v) : v);
        }
      }
    }
    out.push_back(std::move(h));
  }
  for (size_t i = 0; fill_vectors && i < job.references.size(); ++i) {
    const ReferenceArgument& r = job.references[i];
    std::string path =
        "KernelSpecification.ReferenceArguments[" + std::to_string(i) + "] (" + r.name + ")";
    for (size_t j = 0; j < out.size(); ++j) {  // out[j] is job.arguments[j]'s
      HostArgument& h = out[j];
      if (h.name != r.target) continue;
      std::uint64_t scalars = h.elements * static_cast<std::uint64_t>(h.type.components);
      if (r.fill_type == "BinaryRaw") {
        h.reference = read_raw(job, path + ".DataSource", r.data_source,
                               scalars * static_cast<std::uint64_t>(h.type.scalar_bytes));
      } else {
        double v = eval(r.fill_value, path + ".FillValue").as_double();
        require_fits(path, h.type.kind, job.arguments[j].type, v);
        h.reference.assign(h.data.size(), 0);
        for (std::uint64_t k = 0; k < scalars; ++k) write_scalar(h.type, h.reference.data(), k, v);
      }
      h.validation_method = r.validation_method;
      h.threshold = r.threshold;
    }
  }
  return out;
}

std::string Comparison::describe(const std::string& arg) const {
  if (ok) return {};
  std::ostringstream s;
  s << "output '" << arg << "' differs from the reference at " << mismatches
    << " element(s); first at index " << first_bad << ": got " << actual_at_first << ", expected "
    << expected_at_first << " (max abs error " << max_abs_error << ")";
  return s.str();
}

Comparison compare_output(const HostArgument& arg, const std::vector<unsigned char>& actual,
                          const std::vector<unsigned char>& expected, double abs_tol,
                          double rel_tol) {
  Comparison c;
  std::uint64_t n = arg.elements * static_cast<std::uint64_t>(arg.type.components);
  if (actual.size() != expected.size()) {
    c.ok = false;
    c.mismatches = n;
    return c;
  }
  for (std::uint64_t i = 0; i < n; ++i) {
    double a = read_scalar(arg.type, actual.data(), i);
    double e = read_scalar(arg.type, expected.data(), i);
    bool good;
    if (std::isnan(a) || std::isnan(e)) {
      good = std::isnan(a) && std::isnan(e);
    } else {
      double err = std::fabs(a - e);
      if (std::isinf(a) || std::isinf(e)) err = a == e ? 0 : INFINITY;
      c.max_abs_error = std::max(c.max_abs_error, err);
      if (arg.threshold && arg.validation_method == "SideBySideRelativeComparison")
        good = err <= *arg.threshold * std::fabs(e);
      else if (arg.threshold)
        good = err <= *arg.threshold;
      else
        good = err <= abs_tol + rel_tol * std::fabs(e);
    }
    if (!good) {
      if (c.ok) c.first_bad = i, c.actual_at_first = a, c.expected_at_first = e;
      c.ok = false;
      ++c.mismatches;
    }
  }
  return c;
}

}  // namespace gputune::tuner
