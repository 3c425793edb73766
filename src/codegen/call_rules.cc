/*!
 * \file call_rules.cc
 * \brief The registry behind call_rules.h and the helpers rules share.
 */
#include "codegen/call_rules.h"

#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace tilelang_musa {
namespace codegen {

namespace {

struct CallRuleTable {
  std::mutex mutex;  // registration happens at library load; the lock only guards late registrations
  std::unordered_map<std::string, CallRule> rules;
  std::unordered_map<std::string, std::string> origins;  // op name -> file that registered its rule
};

CallRuleTable& Table() {
  static CallRuleTable* table = new CallRuleTable();  // never destroyed: rules may run during shutdown
  return *table;
}

}  // namespace

void RegisterCallRule(const std::string& op_name, CallPosition position, CallPrinter print, const char* origin) {
  CallRuleTable& table = Table();
  std::lock_guard<std::mutex> lock(table.mutex);
  auto [it, inserted] = table.origins.emplace(op_name, origin);
  if (!inserted) {
    if (it->second == origin) return;  // a second copy of this library re-running its initialisers
    TVM_FFI_THROW(RuntimeError) << "MUSA codegen: a print rule for `" << op_name << "` is registered by both "
                                << it->second << " and " << origin;
  }
  table.rules.emplace(op_name, CallRule{position, std::move(print)});
}

const CallRule* FindCallRule(const std::string& op_name) {
  CallRuleTable& table = Table();
  std::lock_guard<std::mutex> lock(table.mutex);
  auto it = table.rules.find(op_name);
  return it == table.rules.end() ? nullptr : &it->second;  // node-based map: the address stays valid
}

std::vector<std::string> ListCallRules() {
  CallRuleTable& table = Table();
  std::lock_guard<std::mutex> lock(table.mutex);
  std::vector<std::string> names;
  names.reserve(table.rules.size());
  for (const auto& kv : table.rules) names.push_back(kv.first);
  std::sort(names.begin(), names.end());
  return names;
}

void CallContext::Fail(const CallView& call, const std::string& message) const {
  TVM_FFI_THROW(ValueError) << "MUSA codegen: kernel `" << kernel_name() << "`: call `" << call.op_name()
                            << "`: " << message;
  TVM_FFI_UNREACHABLE();
}

void CheckArgCount(CallContext& ctx, const CallView& call, size_t count) {
  size_t got = call.args().size();
  if (got != count) {
    ctx.Fail(call, "expects " + std::to_string(count) + " argument(s), got " + std::to_string(got));
  }
}

std::string StringArg(CallContext& ctx, const CallView& call, size_t index) {
  static const TypeKey string_imm("ir.StringImm");
  Array<ObjectRef> args = call.args();
  if (index >= args.size() || !IsA(args[index], string_imm)) {
    ctx.Fail(call, "argument " + std::to_string(index) + " must be a string constant (ir.StringImm)");
  }
  return std::string(StringImmView(args[index]).value());
}

std::string PrintFunctionCall(CallContext& ctx, const std::string& name, const Array<ObjectRef>& args,
                              size_t first) {
  std::string out = name + "(";
  for (size_t i = first; i < args.size(); ++i) {
    if (i != first) out += ", ";
    out += ctx.PrintBare(args[i]);
  }
  return out + ")";
}

}  // namespace codegen
}  // namespace tilelang_musa
