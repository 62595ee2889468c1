// Locating and reading ../shared/testvectors (calibration test vectors) from tests.
//
// Search order: $QK_TESTVECTORS_DIR, then the compile-time QK_TESTVECTORS_DIR
// (<source>/../shared/testvectors: a CI clone with shared/ beside it), then
// /work/shared/testvectors. A test that needs the vectors FAILS when none exists.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace quantkit::testing {

inline bool TestVectorsDirUsable(const std::string& dir) {
  std::ifstream f(dir + "/README.md");
  return !dir.empty() && f.good();
}

// Empty string if not found (callers must FAIL, not skip).
inline std::string FindTestVectorsDir() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("QK_TESTVECTORS_DIR")) candidates.emplace_back(env);
#ifdef QK_TESTVECTORS_DIR
  candidates.emplace_back(QK_TESTVECTORS_DIR);
#endif
  candidates.emplace_back("/work/shared/testvectors");
  for (const std::string& c : candidates) {
    if (TestVectorsDirUsable(c)) return c;
  }
  return "";
}

inline std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline nlohmann::json LoadJson(const std::string& path) {
  return nlohmann::json::parse(ReadFileOrEmpty(path), nullptr, /*allow_exceptions=*/false);
}

inline std::vector<float> LoadF32(const std::string& path) {
  const std::string bytes = ReadFileOrEmpty(path);
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

inline std::vector<int64_t> LoadI64(const std::string& path) {
  const std::string bytes = ReadFileOrEmpty(path);
  std::vector<int64_t> v(bytes.size() / sizeof(int64_t));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(int64_t));
  return v;
}

// "40f00000" -> float with those bits.
inline float FloatFromHex(const std::string& hex) {
  uint32_t u = static_cast<uint32_t>(std::stoul(hex, nullptr, 16));
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

inline std::string HexOfFloat(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%08x", u);
  return buf;
}

}  // namespace quantkit::testing
