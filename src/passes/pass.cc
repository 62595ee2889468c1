#include "passes/pass.h"

#include "common/check.h"

namespace quantkit::passes {

void PassReport::Add(std::string_view name, int64_t n) {
  auto it = counts.find(name);
  if (it == counts.end()) it = counts.emplace(std::string(name), 0).first;
  it->second += n;
}

int64_t PassReport::Count(std::string_view name) const {
  const auto it = counts.find(name);
  QK_CHECK(it != counts.end(), "pass '{}' reports no counter '{}'", pass, name);
  return it->second;
}

void PassReport::Append(std::string_view name, std::string item) {
  auto it = lists.find(name);
  if (it == lists.end()) it = lists.emplace(std::string(name), std::vector<std::string>{}).first;
  it->second.push_back(std::move(item));
}

const std::vector<std::string>& PassReport::List(std::string_view name) const {
  const auto it = lists.find(name);
  QK_CHECK(it != lists.end(), "pass '{}' reports no list '{}'", pass, name);
  return it->second;
}

Result<PassReport> RunPass(ir::Model& model, const Pass& pass) {
  PassReport report;
  report.pass = pass.Name();
  QK_RETURN_IF_ERROR(pass.Run(model, &report).WithContext(fmt::format("pass '{}'", pass.Name())));
  return report;
}

Status RunPasses(ir::Model& model, const std::vector<const Pass*>& passes,
                 std::vector<PassReport>* reports) {
  for (const Pass* pass : passes) {
    QK_ASSIGN_OR_RETURN(PassReport report, RunPass(model, *pass));
    if (reports) reports->push_back(std::move(report));
  }
  return Status::Ok();
}

const PassReport* FindReport(const std::vector<PassReport>& reports, std::string_view name) {
  for (const PassReport& r : reports) {
    if (r.pass == name) return &r;
  }
  return nullptr;
}

}  // namespace quantkit::passes
