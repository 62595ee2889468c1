#include "train/checkpoint_io.h"

#include <fmt/format.h>

#include <new>

#include "common/check.h"
#include "common/file_checks.h"
#include "common/file_util.h"
#include "train/checkpoint_precheck.h"
#include "train/qat_trainer.h"

namespace quantkit::train {
namespace {

// libtorch's messages carry a backtrace after the first line: the first line is the reason.
std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

Status NotACheckpoint(const std::string& path, const std::string& why) {
  return MakeStatus(StatusCode::kInvalidArgument, "{}: not a readable quantkit QAT checkpoint ({})", path, why);
}

}  // namespace

Status ReadingCheckpoint(const std::string& path, const std::function<Status()>& body) {
  try {
    return body();
  } catch (const c10::Error& e) {
    return NotACheckpoint(path, FirstLine(e.what_without_backtrace()));
  } catch (const std::bad_alloc&) {
    return MakeStatus(StatusCode::kResourceExhausted, "{}: out of memory while reading the checkpoint", path);
  } catch (const std::exception& e) {
    return NotACheckpoint(path, FirstLine(e.what()));
  }
}

Status ReadCheckpointArchive(const std::string& path, const c10::optional<at::Device>& device,
                             torch::serialize::InputArchive* archive) {
  // A missing file, a directory or a FIFO is named before libtorch sees it ("errno 2 on fopen").
  QK_RETURN_IF_ERROR(CheckRegularFile(path));
  QK_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> file, MappedFile::Open(path));
  QK_RETURN_IF_NOT(file->size() > 0, StatusCode::kInvalidArgument, "{}: empty file, not a QAT checkpoint", path);
  // Declared sizes first: libtorch allocates what a record or a pickle opcode declares.
  QK_RETURN_IF_ERROR(PrecheckCheckpointArchive(static_cast<const uint8_t*>(file->data()), file->size(), path));
  return ReadingCheckpoint(path, [&]() -> Status {
    archive->load_from(reinterpret_cast<const char*>(file->data()), file->size(), device);
    return Status::Ok();
  });
}

Status WriteCheckpointArchive(torch::serialize::OutputArchive& archive, const std::string& path) {
  QK_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFile> out, AtomicFile::Create(path));
  // libtorch's writer throws from its destructor when a write fails: the writer function never
  // fails towards it; the first error is kept and reported once libtorch is done.
  Status written = Status::Ok();
  const Status serialized = ReadingCheckpoint(path, [&]() -> Status {
    archive.save_to([&](const void* data, size_t size) -> size_t {
      if (written.ok()) written = out->Write(data, size);
      return size;
    });
    return Status::Ok();
  });
  QK_RETURN_IF_NOT(serialized.ok(), StatusCode::kInternal, "{}: cannot serialize the checkpoint: {}", path,
                   serialized.message());
  QK_RETURN_IF_ERROR(written);
  return out->Commit();
}

Status CheckCheckpointFile(const std::string& path) {
  torch::serialize::InputArchive archive;
  QK_RETURN_IF_ERROR(ReadCheckpointArchive(path, at::Device(at::kCPU), &archive));
  return ReadingCheckpoint(path, [&]() -> Status {
    at::Tensor step;
    QK_RETURN_IF_NOT(archive.try_read("step", step) && step.numel() == 1 && !step.is_floating_point() &&
                         step.item<int64_t>() >= 0,
                     StatusCode::kInvalidArgument, "{}: not a QAT checkpoint (no step count)", path);
    torch::serialize::InputArchive optimizer;
    QK_RETURN_IF_NOT(archive.try_read("optimizer", optimizer), StatusCode::kInvalidArgument,
                     "{}: not a QAT checkpoint (no optimizer state)", path);
    bool has_parameters = false;
    for (const std::string& key : archive.keys()) has_parameters |= key.rfind("param/", 0) == 0;
    QK_RETURN_IF_NOT(has_parameters, StatusCode::kInvalidArgument, "{}: not a QAT checkpoint (no parameters)", path);
    return Status::Ok();
  });
}

}  // namespace quantkit::train
