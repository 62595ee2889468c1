#include <gtest/gtest.h>

#include "common/check.h"
#include "quantkit/status.h"

namespace quantkit {
namespace {

Status FailIfNegative(int x) {
  QK_RETURN_IF_NOT(x >= 0, StatusCode::kInvalidArgument, "value {} is negative", x);
  return Status::Ok();
}

Result<int> Doubled(int x) {
  QK_RETURN_IF_ERROR(FailIfNegative(x));
  return 2 * x;
}

Status UseAssign(int x, int* out) {
  QK_ASSIGN_OR_RETURN(*out, Doubled(x));
  return Status::Ok();
}

TEST(Status, OkIsDefaultAndCheap) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(Status, CarriesCodeAndMessage) {
  Status s = FailIfNegative(-3);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "value -3 is negative");
  EXPECT_EQ(s.WithContext("model.onnx").message(), "model.onnx: value -3 is negative");
}

TEST(Result, PropagatesThroughMacros) {
  int out = 0;
  EXPECT_TRUE(UseAssign(4, &out).ok());
  EXPECT_EQ(out, 8);
  Status s = UseAssign(-1, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(out, 8);  // unchanged on failure
}

TEST(Result, FromOkStatusIsAnInternalError) {
  Result<int> r{Status::Ok()};
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}

TEST(ExitCodes, AreDocumented) {
  EXPECT_EQ(ExitCodeFor(StatusCode::kOk), 0);
  EXPECT_EQ(ExitCodeFor(StatusCode::kInvalidModel), 2);
  EXPECT_EQ(ExitCodeFor(StatusCode::kInvalidArgument), 2);
  EXPECT_EQ(ExitCodeFor(StatusCode::kUnsupported), 3);
  EXPECT_EQ(ExitCodeFor(StatusCode::kIoError), 4);
  EXPECT_EQ(ExitCodeFor(StatusCode::kInternal), 70);
}

TEST(Check, ThrowsInternalErrorOnlyForInvariants) {
  EXPECT_THROW(QK_CHECK(1 + 1 == 3, "arithmetic {}", "broke"), InternalError);
  EXPECT_NO_THROW(QK_CHECK(true, "fine"));
}

}  // namespace
}  // namespace quantkit
