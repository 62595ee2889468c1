// .npz archives as a streaming Source: each member (.npy, stored or deflated) is read row by row
// straight out of the archive, so a 4 MB archive whose member declares 4 GB costs only the rows
// that are used (`--samples 16` reads 16 rows), never the declared size.
//
//   open:  the central directory gives each member's declared size and CRC-32; the .npy header
//          is read from the member's first bytes and checked against the declared size
//          (ParseNpyHeader); dtype and sample shape are checked against the model input.
//   read:  Read(start, count) continues the member's decompression stream from where the last
//          read stopped (sequential passes cost one decompression); a read behind that point
//          reopens the member and skips forward.
// Fortran-order members are not row-contiguous: those are read whole, and only when their
// declared size is at most kMaxWholeMemberBytes.
#include <zip.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "common/check.h"
#include "common/file_checks.h"
#include "common/sha256.h"
#include "common/text.h"
#include "data/npy.h"
#include "data/source_internal.h"

namespace quantkit::data::internal {
namespace {

constexpr uint64_t kMaxWholeMemberBytes = uint64_t{1} << 30;

struct ZipCloser {
  void operator()(zip_t* z) const { zip_discard(z); }
};
struct ZipFileCloser {
  void operator()(zip_file_t* f) const { zip_fclose(f); }
};

// One member feeding one model input.
struct Member {
  std::string input;       // model input name
  std::string where;       // "archive.npz:x.npy" for messages
  zip_uint64_t index = 0;  // in the archive
  NpyHeader header;
  int64_t rows = 0;  // samples
  size_t row_bytes = 0;
  bool single_sample = false;  // the array is one sample (rank of the input minus one)
  std::unique_ptr<zip_file_t, ZipFileCloser> stream;
  int64_t next_row = 0;  // row the stream is positioned at
};

Status ReadExactly(zip_file_t* f, uint8_t* dst, size_t n, const std::string& where) {
  while (n > 0) {
    const zip_int64_t got = zip_fread(f, dst, n);
    QK_RETURN_IF_NOT(got > 0, StatusCode::kInvalidModel, "{}: member is truncated or corrupt",
                     where);
    dst += got;
    n -= static_cast<size_t>(got);
  }
  return Status::Ok();
}

// After a member's last byte: a further read returns 0 bytes when its size and CRC-32 hold, and
// fails (or returns more) when they do not.
Status ExpectMemberEnd(zip_file_t* f, const std::string& where) {
  uint8_t extra = 0;
  const zip_int64_t tail = zip_fread(f, &extra, 1);
  QK_RETURN_IF_NOT(tail == 0, StatusCode::kInvalidModel,
                   "{}: the member fails its checksum or size ({})", where,
                   tail < 0 ? zip_file_strerror(f) : "longer than declared");
  return Status::Ok();
}

class NpzSource final : public Source {
 public:
  NpzSource(std::unique_ptr<zip_t, ZipCloser> archive, std::vector<Member> members,
            std::string description, std::string fingerprint)
      : archive_(std::move(archive)),
        members_(std::move(members)),
        description_(std::move(description)),
        fingerprint_(std::move(fingerprint)) {}

  int64_t num_samples() const override { return members_.front().rows; }
  std::vector<std::string> input_names() const override {
    std::vector<std::string> names;
    for (const Member& m : members_) names.push_back(m.input);
    return names;
  }
  Result<Batch> Read(int64_t start, int64_t count) const override {
    QK_RETURN_IF_NOT(start >= 0 && count > 0 && start + count <= num_samples(),
                     StatusCode::kInternal, "NpzSource: samples [{}, {}) out of range", start,
                     start + count);
    std::lock_guard<std::mutex> lock(mutex_);  // one decompression stream per member
    Batch b;
    b.size = count;
    for (Member& m : members_) {
      QK_ASSIGN_OR_RETURN(ir::Tensor rows, ReadRows(m, start, count));
      b.inputs.emplace_back(m.input, std::move(rows));
    }
    return b;
  }
  std::string Describe() const override { return description_; }
  std::string Fingerprint() const override { return fingerprint_; }

 private:
  Result<ir::Tensor> ReadRows(Member& m, int64_t start, int64_t count) const {
    if (!m.stream || start < m.next_row) {
      m.stream.reset(zip_fopen_index(archive_.get(), m.index, 0));
      QK_RETURN_IF_NOT(m.stream != nullptr, StatusCode::kInvalidModel, "{}: cannot read member: {}",
                       m.where, zip_strerror(archive_.get()));
      std::vector<uint8_t> skip(m.header.data_offset);
      QK_RETURN_IF_ERROR(ReadExactly(m.stream.get(), skip.data(), skip.size(), m.where));
      m.next_row = 0;
    }
    // Skip forward in bounded chunks (never the whole gap at once).
    std::vector<uint8_t> scratch;
    while (m.next_row < start) {
      const int64_t n = std::min<int64_t>(
          start - m.next_row,
          std::max<int64_t>(1, (int64_t{1} << 24) / std::max<size_t>(m.row_bytes, 1)));
      scratch.resize(static_cast<size_t>(n) * m.row_bytes);
      QK_RETURN_IF_ERROR(ReadExactly(m.stream.get(), scratch.data(), scratch.size(), m.where));
      m.next_row += n;
    }
    std::vector<int64_t> dims{count};
    dims.insert(dims.end(), m.header.shape.begin() + (m.single_sample ? 0 : 1),
                m.header.shape.end());
    ir::Tensor t(m.header.dtype, dims);
    auto* dst = static_cast<uint8_t*>(t.mutable_data());
    QK_RETURN_IF_ERROR(ReadExactly(m.stream.get(), dst, t.nbytes(), m.where));
    m.next_row += count;
    // The member's last row: reading past it makes libzip compare the CRC-32 (members too large to
    // verify at open are verified here, once the pass has read them whole).
    if (m.next_row == m.rows) QK_RETURN_IF_ERROR(ExpectMemberEnd(m.stream.get(), m.where));
    if (m.header.big_endian && m.header.item_size > 1) {
      for (size_t i = 0; i < t.nbytes(); i += m.header.item_size)
        std::reverse(dst + i, dst + i + m.header.item_size);
    }
    return t;
  }

  std::unique_ptr<zip_t, ZipCloser> archive_;
  mutable std::vector<Member> members_;
  mutable std::mutex mutex_;
  std::string description_;
  std::string fingerprint_;
};

// Members up to this size are read through once at open to verify their CRC-32, so that a
// damaged archive fails before any run, even when only its first samples are used.
constexpr uint64_t kMaxVerifiedAtOpenBytes = uint64_t{64} << 20;

// Reads the whole member in bounded chunks and checks its end (size and CRC-32).
Status VerifyMember(zip_t* archive, zip_uint64_t index, uint64_t declared,
                    const std::string& where) {
  std::unique_ptr<zip_file_t, ZipFileCloser> f(zip_fopen_index(archive, index, 0));
  QK_RETURN_IF_NOT(f != nullptr, StatusCode::kInvalidModel, "{}: cannot read member: {}", where,
                   zip_strerror(archive));
  std::vector<uint8_t> chunk(static_cast<size_t>(std::min<uint64_t>(declared, uint64_t{1} << 20)));
  for (uint64_t left = declared; left > 0;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(left, chunk.size()));
    QK_RETURN_IF_ERROR(ReadExactly(f.get(), chunk.data(), n, where));
    left -= n;
  }
  return ExpectMemberEnd(f.get(), where);
}

// Reads the member's .npy header (and nothing more) and checks it against the declared size.
Result<NpyHeader> ReadMemberHeader(zip_t* archive, zip_uint64_t index, uint64_t declared,
                                   const std::string& where) {
  std::unique_ptr<zip_file_t, ZipFileCloser> f(zip_fopen_index(archive, index, 0));
  QK_RETURN_IF_NOT(f != nullptr, StatusCode::kInvalidModel, "{}: cannot read member: {}", where,
                   zip_strerror(archive));
  std::vector<uint8_t> head(static_cast<size_t>(std::min<uint64_t>(declared, kNpyPreambleMax)));
  QK_RETURN_IF_ERROR(ReadExactly(f.get(), head.data(), head.size(), where));
  // The preamble (magic, version, header length) says how much more to read; the length is
  // capped here and every field is checked by ParseNpyHeader, which sees all that was read.
  if (head.size() == kNpyPreambleMax && head[6] >= 1 && head[6] <= 3) {
    const size_t len_bytes = head[6] == 1 ? 2 : 4;
    uint32_t header_len = 0;
    for (size_t i = 0; i < len_bytes; ++i)
      header_len |= static_cast<uint32_t>(head[8 + i]) << (8 * i);
    const uint64_t want = std::min<uint64_t>(
        declared, 8 + len_bytes + std::min<uint32_t>(header_len, kMaxNpyHeaderBytes));
    const size_t have = head.size();
    if (want > have) {
      head.resize(static_cast<size_t>(want));
      QK_RETURN_IF_ERROR(ReadExactly(f.get(), head.data() + have, head.size() - have, where));
    }
  }
  return ParseNpyHeader(head.data(), head.size(), declared, where);
}

}  // namespace

Result<std::unique_ptr<Source>> OpenNpz(const std::string& path,
                                        const std::vector<InputSpec>& inputs) {
  QK_RETURN_IF_ERROR(CheckRegularFile(path));
  int err = 0;
  std::unique_ptr<zip_t, ZipCloser> archive(zip_open(path.c_str(), ZIP_RDONLY, &err));
  if (!archive) {
    zip_error_t ze;
    zip_error_init_with_code(&ze, err);
    Status st = MakeStatus(err == ZIP_ER_NOENT ? StatusCode::kNotFound : StatusCode::kInvalidModel,
                           "{}: not a readable .npz archive: {}", path, zip_error_strerror(&ze));
    zip_error_fini(&ze);
    return st;
  }
  // Members by array name (x.npy -> "x").
  std::vector<std::pair<std::string, zip_stat_t>> arrays;
  const zip_int64_t n = zip_get_num_entries(archive.get(), 0);
  for (zip_int64_t i = 0; i < n; ++i) {
    zip_stat_t st;
    if (zip_stat_index(archive.get(), static_cast<zip_uint64_t>(i), 0, &st) != 0 || !st.name)
      continue;
    const std::string name = st.name;
    if (name.size() < 4 || name.compare(name.size() - 4, 4, ".npy") != 0) continue;
    const std::string array = name.substr(0, name.size() - 4);
    QK_RETURN_IF_NOT(
        std::none_of(arrays.begin(), arrays.end(), [&](const auto& a) { return a.first == array; }),
        StatusCode::kInvalidModel, "{}:{}: a second member of that name", path,
        EscapeControl(name));
    arrays.emplace_back(array, st);
  }
  Sha256 hash;
  std::vector<Member> members;
  for (const InputSpec& spec : inputs) {
    auto it = std::find_if(arrays.begin(), arrays.end(),
                           [&](const auto& a) { return a.first == spec.name; });
    // np.savez(path, x) names its one array arr_0: that feeds a single-input model. Any other name
    // must be the input's (a 'foo' beside input 'x' is more likely another model's data).
    if (it == arrays.end() && arrays.size() == 1 && inputs.size() == 1 &&
        arrays.front().first == "arr_0") {
      it = arrays.begin();
    }
    std::vector<std::string> present;
    for (const auto& a : arrays) present.push_back(a.first);
    QK_RETURN_IF_NOT(it != arrays.end(), StatusCode::kInvalidArgument,
                     "{}: no member '{}.npy' for model input '{}' (the archive holds: {})", path,
                     spec.name, spec.name,
                     present.empty() ? std::string("no .npy member") : ListSome(present));
    const zip_stat_t& st = it->second;
    Member m;
    m.input = spec.name;
    m.where = path + ":" + st.name;
    m.index = st.index;
    if (st.size <= kMaxVerifiedAtOpenBytes)
      QK_RETURN_IF_ERROR(VerifyMember(archive.get(), st.index, st.size, m.where));
    QK_ASSIGN_OR_RETURN(m.header, ReadMemberHeader(archive.get(), st.index, st.size, m.where));
    const NpyHeader& h = m.header;
    QK_RETURN_IF_NOT(!h.shape.empty(), StatusCode::kInvalidArgument,
                     "{}: array for input '{}' is a scalar", m.where, spec.name);
    QK_RETURN_IF_NOT(
        !h.fortran || h.shape.size() < 2 || st.size <= kMaxWholeMemberBytes,
        StatusCode::kResourceExhausted,
        "{}: a Fortran-order member of {} bytes cannot be streamed (save it in C order)", m.where,
        st.size);
    QK_RETURN_IF_NOT(!h.fortran || h.shape.size() < 2, StatusCode::kUnsupported,
                     "{}: Fortran-order arrays in .npz are not supported (np.ascontiguousarray)",
                     m.where);
    m.single_sample = !spec.dims.empty() && h.shape.size() + 1 == spec.dims.size();
    // dtype and per-sample shape, checked on an empty batch of the member's shape.
    std::vector<int64_t> probe_dims = h.shape;
    if (m.single_sample) probe_dims.insert(probe_dims.begin(), 1);
    m.rows = probe_dims.front();
    probe_dims.front() = 0;
    QK_RETURN_IF_ERROR(
        Conform(ir::Tensor(h.dtype, probe_dims), spec, /*batched=*/true, m.where, nullptr)
            .status());
    m.row_bytes = h.item_size;
    for (size_t k = 1; k < probe_dims.size(); ++k)
      m.row_bytes *= static_cast<size_t>(probe_dims[k]);
    QK_RETURN_IF_NOT(members.empty() || m.rows == members.front().rows,
                     StatusCode::kInvalidArgument,
                     "{}: input '{}' has {} samples but another input has {}", path, spec.name,
                     m.rows, members.front().rows);
    // The central directory's CRC-32 and size identify the content without reading it.
    hash.Update(fmt::format("{}:{}:{:08x}:{}", spec.name, st.name, st.crc, st.size));
    members.push_back(std::move(m));
  }
  QK_RETURN_IF_NOT(!members.empty() && members.front().rows > 0, StatusCode::kInvalidArgument,
                   "{}: the data holds no samples", path);
  const std::string description = fmt::format("{} ({} samples)", path, members.front().rows);
  return std::unique_ptr<Source>(
      new NpzSource(std::move(archive), std::move(members), description, hash.HexDigest()));
}

}  // namespace quantkit::data::internal
