#include <gtest/gtest.h>

#include "ir/tensor.h"

namespace quantkit::ir {
namespace {

TEST(DType, StorageSizes) {
  EXPECT_EQ(StorageBytes(DType::kFloat, 6), 24u);
  EXPECT_EQ(StorageBytes(DType::kInt4, 5), 3u);  // two per byte, rounded up
  EXPECT_EQ(StorageBytes(DType::kBFloat16, 3), 6u);
  EXPECT_EQ(StorageBytes(DType::kFloat8E4M3FN, 3), 3u);
  EXPECT_EQ(StorageBytes(DType::kString, 3), 0u);
  EXPECT_TRUE(IsKnownDType(23));
  EXPECT_FALSE(IsKnownDType(0));
  EXPECT_FALSE(IsKnownDType(99));
  EXPECT_EQ(DTypeName(DType::kFloat8E5M2FNUZ), "float8e5m2fnuz");
}

TEST(Tensor, OwnsZeroFilledBytes) {
  Tensor t(DType::kFloat, {2, 3});
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.nbytes(), 24u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(t.data_as<float>()[i], 0.0f);
}

TEST(Tensor, ScalarHasOneElement) {
  Tensor t(DType::kInt64, {});
  EXPECT_EQ(t.numel(), 1);
  EXPECT_EQ(t.nbytes(), 8u);
}

TEST(Tensor, CopyOnWriteKeepsSharedBufferIntact) {
  auto buffer = std::make_shared<HeapBuffer>(std::vector<uint8_t>(16, 7));
  Tensor a(DType::kUint8, {4}, buffer, 4);
  Tensor b = a;
  b.mutable_data_as<uint8_t>()[0] = 9;
  EXPECT_EQ(a.data_as<uint8_t>()[0], 7);  // a still views the original bytes
  EXPECT_EQ(b.data_as<uint8_t>()[0], 9);
  EXPECT_EQ(buffer->data()[4], 7);
  EXPECT_FALSE(a.ContentEquals(b));
}

TEST(Tensor, ContentEqualsComparesDtypeDimsBytes) {
  auto a = Tensor::FromVector<float>(DType::kFloat, {2}, {1.0f, 2.0f});
  auto b = Tensor::FromVector<float>(DType::kFloat, {2}, {1.0f, 2.0f});
  auto c = Tensor::FromVector<float>(DType::kFloat, {1, 2}, {1.0f, 2.0f});
  EXPECT_TRUE(a.ContentEquals(b));
  EXPECT_FALSE(a.ContentEquals(c));
}

}  // namespace
}  // namespace quantkit::ir
