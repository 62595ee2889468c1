#include "data/npz.h"

#include <zip.h>

#include <memory>
#include <unordered_set>

#include "common/check.h"
#include "common/file_checks.h"
#include "common/file_util.h"
#include "common/text.h"
#include "data/npy.h"

namespace quantkit::data {
namespace {

struct ArchiveDiscarder {
  void operator()(zip_t* z) const { zip_discard(z); }
};
struct MemberCloser {
  void operator()(zip_file_t* f) const { zip_fclose(f); }
};
struct SourceFreer {
  void operator()(zip_source_t* s) const { zip_source_free(s); }
};

// libzip's error as text, released afterwards.
std::string ErrorText(zip_error_t* error) {
  std::string text = zip_error_strerror(error);
  zip_error_fini(error);
  return text;
}

// The whole archive built in memory (libzip writes through a buffer source), returned as bytes.
Result<std::string> BuildArchive(const std::vector<NpzArray>& arrays, const std::string& path) {
  std::vector<std::string> members;  // must outlive zip_close: libzip reads them there
  members.reserve(arrays.size());
  std::unordered_set<std::string> names;
  for (const NpzArray& a : arrays) {
    QK_RETURN_IF_NOT(!a.name.empty() && names.insert(a.name).second, StatusCode::kInvalidArgument,
                     "{}: array name '{}' is empty or given twice", path, EscapeControl(a.name));
    QK_ASSIGN_OR_RETURN(std::string bytes, EncodeNpy(a.tensor, path + ":" + a.name + ".npy"));
    members.push_back(std::move(bytes));
  }
  zip_error_t error;
  zip_error_init(&error);
  std::unique_ptr<zip_source_t, SourceFreer> buffer(
      zip_source_buffer_create(nullptr, 0, 0, &error));
  QK_RETURN_IF_NOT(buffer != nullptr, StatusCode::kResourceExhausted, "{}: {}", path,
                   ErrorText(&error));
  zip_source_keep(buffer.get());  // the archive releases its reference on close; ours stays
  std::unique_ptr<zip_t, ArchiveDiscarder> archive(
      zip_open_from_source(buffer.get(), ZIP_TRUNCATE, &error));
  if (!archive) {
    zip_source_free(buffer.get());  // the reference zip_open_from_source did not take
    return MakeStatus(StatusCode::kInternal, "{}: cannot start the archive: {}", path,
                      ErrorText(&error));
  }
  zip_error_fini(&error);
  for (size_t i = 0; i < arrays.size(); ++i) {
    zip_source_t* member =
        zip_source_buffer(archive.get(), members[i].data(), members[i].size(), 0);
    const std::string name = arrays[i].name + ".npy";
    const zip_int64_t index =
        member == nullptr ? -1
                          : zip_file_add(archive.get(), name.c_str(), member, ZIP_FL_ENC_UTF_8);
    if (index < 0) {
      if (member != nullptr) zip_source_free(member);
      return MakeStatus(StatusCode::kInternal, "{}: cannot add '{}': {}", path, EscapeControl(name),
                        zip_strerror(archive.get()));
    }
    // STORED, as np.savez: the reader refuses compressed members (declared sizes it cannot check).
    QK_RETURN_IF_NOT(zip_set_file_compression(archive.get(), static_cast<zip_uint64_t>(index),
                                              ZIP_CM_STORE, 0) == 0,
                     StatusCode::kInternal, "{}: {}", path, zip_strerror(archive.get()));
  }
  QK_RETURN_IF_NOT(zip_close(archive.get()) == 0, StatusCode::kResourceExhausted,
                   "{}: cannot build the archive: {}", path, zip_strerror(archive.get()));
  archive.release();  // closed
  zip_stat_t st;
  zip_stat_init(&st);
  QK_RETURN_IF_NOT(zip_source_stat(buffer.get(), &st) == 0 && (st.valid & ZIP_STAT_SIZE) != 0,
                   StatusCode::kInternal, "{}: the archive's size is unknown", path);
  std::string bytes(static_cast<size_t>(st.size), '\0');
  QK_RETURN_IF_NOT(zip_source_open(buffer.get()) == 0, StatusCode::kInternal,
                   "{}: cannot read the archive back", path);
  const zip_int64_t got = zip_source_read(buffer.get(), bytes.data(), bytes.size());
  zip_source_close(buffer.get());
  QK_RETURN_IF_NOT(got == static_cast<zip_int64_t>(bytes.size()), StatusCode::kInternal,
                   "{}: the archive reads back short", path);
  return bytes;
}

// A member's bytes, exactly `size` of them, then the end of the member (which makes libzip verify
// its CRC-32).
Result<std::vector<uint8_t>> ReadMember(zip_t* archive, zip_uint64_t index, size_t size,
                                        const std::string& where) {
  std::unique_ptr<zip_file_t, MemberCloser> f(zip_fopen_index(archive, index, 0));
  QK_RETURN_IF_NOT(f != nullptr, StatusCode::kInvalidArgument, "{}: cannot read the member: {}",
                   where, zip_strerror(archive));
  std::vector<uint8_t> bytes(size);
  size_t at = 0;
  while (at < size) {
    const zip_int64_t got = zip_fread(f.get(), bytes.data() + at, size - at);
    QK_RETURN_IF_NOT(got > 0, StatusCode::kInvalidArgument,
                     "{}: the member is truncated or corrupt ({})", where,
                     zip_file_strerror(f.get()));
    at += static_cast<size_t>(got);
  }
  uint8_t extra = 0;
  const zip_int64_t tail = zip_fread(f.get(), &extra, 1);
  QK_RETURN_IF_NOT(tail == 0, StatusCode::kInvalidArgument,
                   "{}: the member fails its checksum or size ({})", where,
                   tail < 0 ? zip_file_strerror(f.get()) : "longer than declared");
  return bytes;
}

}  // namespace

Status WriteNpz(const std::string& path, const std::vector<NpzArray>& arrays) {
  QK_ASSIGN_OR_RETURN(std::string bytes, BuildArchive(arrays, path));
  QK_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFile> out, AtomicFile::Create(path));
  QK_RETURN_IF_ERROR(out->Write(bytes.data(), bytes.size()));
  return out->Commit();
}

Result<std::vector<NpzArray>> ReadNpz(const std::string& path) {
  QK_RETURN_IF_ERROR(CheckRegularFile(path));
  QK_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> file, MappedFile::Open(path));
  QK_RETURN_IF_NOT(file->size() > 0, StatusCode::kInvalidArgument,
                   "{}: empty file, not an .npz archive", path);
  zip_error_t error;
  zip_error_init(&error);
  zip_source_t* source = zip_source_buffer_create(file->data(), file->size(), 0, &error);
  QK_RETURN_IF_NOT(source != nullptr, StatusCode::kResourceExhausted, "{}: {}", path,
                   ErrorText(&error));
  std::unique_ptr<zip_t, ArchiveDiscarder> archive(
      zip_open_from_source(source, ZIP_RDONLY | ZIP_CHECKCONS, &error));
  if (!archive) {
    zip_source_free(source);
    // libzip's ZIP_ER_EXISTS ("File already exists") at open is two members of one name.
    const bool duplicate = zip_error_code_zip(&error) == ZIP_ER_EXISTS;
    const std::string why = ErrorText(&error);
    return MakeStatus(StatusCode::kInvalidArgument, "{}: not a readable .npz archive: {}", path,
                      duplicate ? std::string("two members have the same name") : why);
  }
  zip_error_fini(&error);
  const zip_int64_t count = zip_get_num_entries(archive.get(), 0);
  QK_RETURN_IF_NOT(count >= 0 && count <= kMaxNpzMembers, StatusCode::kInvalidArgument,
                   "{}: {} members, at most {} are read", path, count, kMaxNpzMembers);
  std::vector<NpzArray> arrays;
  std::unordered_set<std::string> names;
  for (zip_int64_t i = 0; i < count; ++i) {
    zip_stat_t st;
    QK_RETURN_IF_NOT(zip_stat_index(archive.get(), static_cast<zip_uint64_t>(i), 0, &st) == 0 &&
                         (st.valid & ZIP_STAT_NAME) != 0 && (st.valid & ZIP_STAT_SIZE) != 0 &&
                         (st.valid & ZIP_STAT_COMP_METHOD) != 0,
                     StatusCode::kInvalidArgument, "{}: member {} has no readable directory entry",
                     path, i);
    std::string name = st.name;
    const std::string where = path + ":" + EscapeControl(name);
    QK_RETURN_IF_NOT(name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0,
                     StatusCode::kInvalidArgument, "{}: not an .npy member", where);
    QK_RETURN_IF_NOT(st.comp_method == ZIP_CM_STORE, StatusCode::kInvalidArgument,
                     "{}: a compressed member (method {}); only stored members are read (np.savez)",
                     where, st.comp_method);
    QK_RETURN_IF_NOT(st.size <= file->size(), StatusCode::kInvalidArgument,
                     "{}: the member declares {} bytes in a {}-byte file", where, st.size,
                     file->size());
    name.resize(name.size() - 4);
    QK_RETURN_IF_NOT(names.insert(name).second, StatusCode::kInvalidArgument,
                     "{}: a second member of that name", where);
    QK_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes,
                        ReadMember(archive.get(), static_cast<zip_uint64_t>(i),
                                   static_cast<size_t>(st.size), where));
    QK_ASSIGN_OR_RETURN(ir::Tensor tensor, ParseNpy(bytes.data(), bytes.size(), where));
    arrays.push_back({std::move(name), std::move(tensor)});
  }
  return arrays;
}

}  // namespace quantkit::data
