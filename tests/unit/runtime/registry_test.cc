#include <gtest/gtest.h>

#include <map>

#include "runtime/registry.h"

namespace quantkit::runtime {
namespace {

TEST(Registry, RangesOfOneOpDoNotOverlap) {
  std::map<std::pair<std::string, std::string>, std::vector<const KernelEntry*>> by_op;
  for (const KernelEntry& e : RegisteredKernels()) {
    EXPECT_LE(e.since_version, e.until_version) << e.op_type;
    EXPECT_NE(e.factory, nullptr) << e.op_type;
    by_op[{e.domain, e.op_type}].push_back(&e);
  }
  for (const auto& [key, rows] : by_op) {
    for (size_t i = 0; i < rows.size(); ++i) {
      for (size_t j = i + 1; j < rows.size(); ++j) {
        const bool overlap = rows[i]->since_version <= rows[j]->until_version &&
                             rows[j]->since_version <= rows[i]->until_version;
        EXPECT_FALSE(overlap) << key.second << " has overlapping opset ranges";
      }
    }
  }
}

TEST(Registry, ResolvesByOpsetRange) {
  EXPECT_NE(FindKernel("", "Conv", 17), nullptr);
  EXPECT_NE(FindKernel("", "Scatter", 9), nullptr);
  EXPECT_EQ(FindKernel("", "Scatter", 11), nullptr);   // renamed ScatterElements at 11
  EXPECT_EQ(FindKernel("", "Upsample", 10), nullptr);  // removed at opset 10
  EXPECT_EQ(FindKernel("com.example", "Conv", 17), nullptr);
  EXPECT_EQ(FindKernel("", "NoSuchOp", 17), nullptr);
}

}  // namespace
}  // namespace quantkit::runtime
