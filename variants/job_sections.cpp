// Reading a T1 job's sections of lists (declared in job_reader.h, called by parse_job in
// job.cpp): the ConfigurationSpace's TuningParameters and Conditions, and the
// KernelSpecification's Arguments and ReferenceArguments, each entry checked where it is.
// Must not: build the space or bind a context (space.h, instantiate.h run after it).
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "variants/expr.h"
#include "variants/job_reader.h"

namespace gputune::detail {

namespace {

const std::set<std::string> kParamKeys = {"Name", "Type", "Values", "Default"};
const std::set<std::string> kCondKeys = {"Expression", "Parameters"};
const std::set<std::string> kArgKeys = {"Name",       "Type",     "MemoryType", "AccessType",
                                        "FillType",   "Size",     "FillValue",  "DataSource",
                                        "RandomSeed", "TypeSize", "Output",     "MemType"};
const std::set<std::string> kRefKeys = {
    "Name",       "TargetName", "FillType",         "FillValue",
    "DataSource", "RandomSeed", "ValidationMethod", "ValidationThreshold"};

}  // namespace

void read_parameters(Reader& r, const json& space, Job& job) {
  const json& params =
      r.require(space, "ConfigurationSpace", "TuningParameters", "a list of {Name, Type, Values}");
  if (!params.is_array() || params.empty())
    r.fail("ConfigurationSpace.TuningParameters", "expected a non-empty list of parameters");
  std::set<std::string> seen;
  for (size_t i = 0; i < params.size(); ++i) {
    std::string path = "ConfigurationSpace.TuningParameters[" + std::to_string(i) + "]";
    const json& p = params[i];
    if (!p.is_object()) r.fail(path, "expected an object {Name, Type, Values}");
    r.note_unknown_keys(p, path, kParamKeys);
    Parameter par;
    par.name = r.get_string(r.require(p, path, "Name", "the parameter's name"), path + ".Name");
    path += " (" + par.name + ")";
    if (par.name.empty() ||
        !(std::isalpha(static_cast<unsigned char>(par.name[0])) || par.name[0] == '_') ||
        !std::all_of(par.name.begin(), par.name.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
        }))
      r.fail(path + ".Name", "'" + par.name + "' is not a valid identifier",
             "use letters, digits and '_' (it becomes a -D macro)");
    if (!seen.insert(par.name).second)
      r.fail(path + ".Name", "parameter '" + par.name + "' is defined twice", "rename one");
    par.type = p.contains("Type") ? r.get_string(p["Type"], path + ".Type") : "int";
    static const std::set<std::string> types = {"int", "uint", "float", "bool", "string"};
    if (!types.count(par.type))
      r.fail(path + ".Type", "unknown type '" + par.type + "'",
             "use one of int, uint, float, bool, string");
    const json& vals =
        r.require(p, path, "Values", "a Python list expression such as \"[1, 2, 4]\"");
    Value v;
    if (vals.is_string()) {
      try {
        v = eval_expression(vals.get<std::string>());
      } catch (const ExprError& e) {
        r.fail(path + ".Values", e.what(), "write a list such as \"[16*i for i in range(1,9)]\"");
      }
    } else if (vals.is_array()) {
      v = r.to_value(vals, path + ".Values");
      r.note(path + ".Values is a JSON array, not the schema's expression string (accepted)");
    } else {
      r.fail(path + ".Values", "expected a list expression string");
    }
    if (!v.is_list())
      r.fail(path + ".Values", std::string("evaluates to a ") + v.type_name() + ", not a list",
             "wrap the values in [ ]");
    par.values = v.as_list();
    if (par.values.empty())
      r.fail(path + ".Values", "the list of values is empty", "give at least one value");
    for (auto& x : par.values) {
      bool ok = (par.type == "int" || par.type == "uint") ? (x.is_int() || x.is_bool())
                : par.type == "float"                     ? x.is_number()
                : par.type == "bool"                      ? (x.is_bool() || x.is_int())
                                                          : x.is_str();
      if (par.type == "uint" && ok && x.as_int() < 0) ok = false;
      if (!ok)
        r.fail(path + ".Values", "value " + x.repr() + " does not match Type '" + par.type + "'",
               "change the value or the Type");
    }
    if (p.contains("Default")) {
      Value d = r.to_value(p["Default"], path + ".Default");
      bool found = std::any_of(par.values.begin(), par.values.end(),
                               [&](const Value& x) { return py_equal(x, d); });
      if (found) {
        par.default_value = d;
      } else {  // Kernel Tuner reads such a file; the first value is what it would start from
        r.note(path + ".Default: " + d.repr() + " is not among the Values; the first value, " +
               par.values.front().repr() + ", is the default configuration's");
      }
    }
    job.parameters.push_back(std::move(par));
  }
}

void read_conditions(Reader& r, const json& space, Job& job) {
  if (!space.contains("Conditions")) return;
  const json& conds = space["Conditions"];
  if (!conds.is_array()) r.fail("ConfigurationSpace.Conditions", "expected a list");
  std::set<std::string> names;
  for (auto& p : job.parameters) names.insert(p.name);
  for (size_t i = 0; i < conds.size(); ++i) {
    std::string path = "ConfigurationSpace.Conditions[" + std::to_string(i) + "]";
    const json& c = conds[i];
    if (!c.is_object()) r.fail(path, "expected an object {Expression, Parameters}");
    r.note_unknown_keys(c, path, kCondKeys);
    Condition cond;
    cond.expression = r.get_expr(r.require(c, path, "Expression", "a boolean Python expression"),
                                 path + ".Expression");
    if (c.contains("Parameters")) {
      if (!c["Parameters"].is_array()) r.fail(path + ".Parameters", "expected a list of names");
      for (auto& n : c["Parameters"]) {
        std::string name = r.get_string(n, path + ".Parameters");
        if (!names.count(name))
          r.fail(path + ".Parameters", "'" + name + "' is not a tuning parameter",
                 "list only names from TuningParameters");
        cond.parameters.push_back(name);
      }
    }
    Symbols syms;
    Expr e = Expr::parse(cond.expression, syms);
    for (int s : e.free_slots())
      if (!names.count(syms.name(s)))
        r.fail(
            path + ".Expression",
            "name '" + syms.name(s) + "' in \"" + cond.expression + "\" is not a tuning parameter",
            "conditions may only use tuning parameters");
    job.conditions.push_back(std::move(cond));
  }
}

namespace {

const std::set<std::string>& argument_types() {
  static const std::set<std::string> t = {
      "bool",   "int8",   "uint8",   "int16",  "uint16",  "int32",   "uint32",  "int64",
      "uint64", "half",   "half2",   "half4",  "half8",   "half16",  "float",   "float2",
      "float4", "float8", "float16", "double", "double2", "double4", "double8", "double16"};
  return t;
}

}  // namespace

void read_arguments(Reader& r, const json& ks, Job& job) {
  if (!ks.contains("Arguments")) return;
  const json& args = ks["Arguments"];
  if (!args.is_array()) r.fail("KernelSpecification.Arguments", "expected a list");
  std::set<std::string> seen;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string path = "KernelSpecification.Arguments[" + std::to_string(i) + "]";
    const json& a = args[i];
    if (!a.is_object()) r.fail(path, "expected an object");
    r.note_unknown_keys(a, path, kArgKeys);
    Argument arg;
    arg.name =
        a.contains("Name") ? r.get_string(a["Name"], path + ".Name") : "arg" + std::to_string(i);
    if (!seen.insert(arg.name).second)
      r.fail(path + ".Name", "argument '" + arg.name + "' appears twice",
             "give each a unique Name");
    arg.type = r.get_string(r.require(a, path, "Type", "an element type such as \"float\""),
                            path + ".Type");
    if (arg.type == "custom")
      r.fail(path + ".Type", "type 'custom' cannot be filled by gputune",
             "use a concrete type such as float");
    if (!argument_types().count(arg.type))
      r.fail(path + ".Type", "unknown type '" + arg.type + "'", "use float, double, int32, ...");
    arg.memory_type = r.get_string(r.require(a, path, "MemoryType", "\"Vector\" or \"Scalar\""),
                                   path + ".MemoryType");
    if (arg.memory_type != "Vector" && arg.memory_type != "Scalar")
      r.fail(path + ".MemoryType", "'" + arg.memory_type + "' is not supported",
             "use Vector (device buffer) or Scalar (by value)");
    arg.access = a.contains("AccessType") ? r.get_string(a["AccessType"], path + ".AccessType")
                                          : "ReadWrite";
    if (arg.access != "ReadOnly" && arg.access != "WriteOnly" && arg.access != "ReadWrite")
      r.fail(path + ".AccessType", "'" + arg.access + "' is not ReadOnly, WriteOnly or ReadWrite");
    if (a.contains("Size")) arg.size_expr = r.get_expr(a["Size"], path + ".Size");
    if (a.contains("FillType")) arg.fill_type = r.get_string(a["FillType"], path + ".FillType");
    if (arg.fill_type != "Constant" && arg.fill_type != "Random" && arg.fill_type != "BinaryRaw")
      r.fail(path + ".FillType", "fill type '" + arg.fill_type + "' is not supported",
             "use Constant, Random or BinaryRaw (with DataSource)");
    if (a.contains("FillValue"))
      arg.fill_value = r.get_expr(a["FillValue"], path + ".FillValue");
    else if (arg.fill_type == "Random")
      arg.fill_value = "1.0";
    if (a.contains("DataSource"))
      arg.data_source = r.get_string(a["DataSource"], path + ".DataSource");
    if (arg.fill_type == "BinaryRaw" && arg.data_source.empty())
      r.fail(path + ".DataSource", "FillType BinaryRaw needs a DataSource",
             "name the raw binary file");
    if (a.contains("RandomSeed")) {
      if (!a["RandomSeed"].is_number_integer()) r.fail(path + ".RandomSeed", "expected an integer");
      arg.seed = a["RandomSeed"].get<std::uint64_t>();
    }
    if (a.contains("Output")) {
      const json& o = a["Output"];
      arg.output = o.is_boolean() ? o.get<bool>() : (o.is_number() && o.get<double>() != 0);
    }
    if (a.contains("MemType")) r.note(path + ".MemType (not in the T1 schema) ignored");
    if (arg.memory_type == "Scalar" && arg.output)
      r.fail(path + ".Output", "a Scalar argument cannot be an output", "make it a Vector");
    job.arguments.push_back(std::move(arg));
  }
}

void read_references(Reader& r, const json& ks, Job& job) {
  if (!ks.contains("ReferenceArguments")) return;
  const json& refs = ks["ReferenceArguments"];
  if (!refs.is_array()) r.fail("KernelSpecification.ReferenceArguments", "expected a list");
  for (size_t i = 0; i < refs.size(); ++i) {
    std::string path = "KernelSpecification.ReferenceArguments[" + std::to_string(i) + "]";
    const json& a = refs[i];
    if (!a.is_object()) r.fail(path, "expected an object");
    r.note_unknown_keys(a, path, kRefKeys);
    ReferenceArgument ref;
    ref.name = r.get_string(r.require(a, path, "Name", "a name"), path + ".Name");
    ref.target = r.get_string(r.require(a, path, "TargetName", "the output argument it checks"),
                              path + ".TargetName");
    auto it = std::find_if(job.arguments.begin(), job.arguments.end(),
                           [&](const Argument& x) { return x.name == ref.target; });
    if (it == job.arguments.end())
      r.fail(path + ".TargetName", "no argument named '" + ref.target + "'",
             "use the Name of a Vector argument");
    if (it->memory_type != "Vector")
      r.fail(path + ".TargetName", "'" + ref.target + "' is a Scalar",
             "reference a Vector argument");
    it->output = true;
    ref.fill_type =
        r.get_string(r.require(a, path, "FillType", "Constant or BinaryRaw"), path + ".FillType");
    if (ref.fill_type != "Constant" && ref.fill_type != "BinaryRaw")
      r.fail(path + ".FillType", "reference fill type '" + ref.fill_type + "' is not supported",
             "use Constant or BinaryRaw (with DataSource)");
    if (a.contains("FillValue")) ref.fill_value = r.get_expr(a["FillValue"], path + ".FillValue");
    if (a.contains("DataSource"))
      ref.data_source = r.get_string(a["DataSource"], path + ".DataSource");
    if (ref.fill_type == "BinaryRaw" && ref.data_source.empty())
      r.fail(path + ".DataSource", "FillType BinaryRaw needs a DataSource");
    if (a.contains("ValidationMethod")) {
      ref.validation_method = r.get_string(a["ValidationMethod"], path + ".ValidationMethod");
      static const std::set<std::string> methods = {"AbsoluteDifference", "SideBySideComparison",
                                                    "SideBySideRelativeComparison"};
      if (!methods.count(ref.validation_method))
        r.fail(path + ".ValidationMethod", "unknown method '" + ref.validation_method + "'",
               "use AbsoluteDifference, SideBySideComparison or SideBySideRelativeComparison");
    }
    if (a.contains("ValidationThreshold")) {
      if (!a["ValidationThreshold"].is_number())
        r.fail(path + ".ValidationThreshold", "expected a number");
      ref.threshold = a["ValidationThreshold"].get<double>();
    }
    job.references.push_back(std::move(ref));
  }
}

}  // namespace gputune::detail
