// Fixed, documented dataset splits (docs/fashion-mnist-splits.md), reproducible in any language.
//
// Rule: key(i) = the i-th output (0-based) of the splitmix64 generator seeded with spec.seed.
// For each class c, the training indices with label c are ranked by (key, index) ascending; the
// first calib_per_class[c] form the calibration split, the next val_per_class[c] the validation
// split, the rest the training split. Each list is then sorted ascending. No language RNG is
// involved, and data/fashion_mnist_splits.json commits the result so readers need not recompute.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "quantkit/status.h"

namespace quantkit::data {

// One step of splitmix64 (Steele, Lea, Flood, OOPSLA 2014): advances *state and returns
//   z = (*state += 0x9e3779b97f4a7c15);  z = (z ^ z >> 30) * 0xbf58476d1ce4e5b9;
//   z = (z ^ z >> 27) * 0x94d049bb133111eb;  return z ^ z >> 31;
uint64_t SplitMix64Next(uint64_t* state);

struct SplitSpec {
  uint64_t seed = 0;
  std::vector<int64_t> calib_per_class;  // indexed by class label
  std::vector<int64_t> val_per_class;    // same size
};

// seed 20240604; calibration 205 images of classes 0-7 and 204 of classes 8-9 (2,048);
// validation 500 per class (5,000); training split: the other 52,952 of the 60,000.
SplitSpec FashionMnistSplitSpec();
inline constexpr int64_t kFashionMnistTrainCount = 60000;
inline constexpr int64_t kFashionMnistCalibCount = 2048;
inline constexpr int64_t kFashionMnistValCount = 5000;

struct Splits {
  int64_t source_count = 0;  // images in the split source (the IDX training file)
  // Sorted ascending, pairwise disjoint; together they cover [0, source_count).
  std::vector<int64_t> calib, val, train;
};

// Applies the rule to the labels of the source file. kInvalidArgument when a label is outside
// [0, number of classes) or a class has fewer images than calib + val ask for.
Result<Splits> ComputeSplits(const std::vector<int64_t>& labels, const SplitSpec& spec);

// Reads data/fashion_mnist_splits.json (version 1): "source_count", "calib", "val" and the
// descriptive keys written by qkdev/zoo/make_splits.py; unknown keys or versions are rejected,
// as are indices out of range, unsorted or duplicated, and overlapping splits. The training
// split is derived (everything else).
Result<Splits> ReadSplitsJson(const std::string& path);

}  // namespace quantkit::data
