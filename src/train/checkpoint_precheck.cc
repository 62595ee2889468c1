#include "train/checkpoint_precheck.h"

#include <zip.h>

#include <memory>
#include <vector>

#include "common/check.h"

namespace quantkit::train {
namespace {

uint64_t ReadLittleEndian(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Size in bytes of the length field of a length-prefixed opcode; 0 when `op` is not one.
int LengthFieldBytes(uint8_t op) {
  switch (op) {
    case 'U': case 'C': case 0x8c: case 0x8a: return 1;  // SHORT_BINSTRING/BYTES/UNICODE, LONG1
    case 'T': case 'B': case 'X': case 0x8b: return 4;   // BINSTRING, BINBYTES, BINUNICODE, LONG4
    case 0x8d: case 0x8e: case 0x96: return 8;           // BINUNICODE8, BINBYTES8, BYTEARRAY8
    default: return 0;
  }
}

// Size of the fixed argument of `op`; -1 for a newline-terminated one (its count of lines in
// *lines), -2 when `op` is not a pickle opcode.
int FixedArgumentBytes(uint8_t op, int* lines) {
  *lines = 0;
  switch (op) {
    case 'K': case 'q': case 'h': case 0x80: case 0x82: return 1;  // BININT1, BINPUT, BINGET, PROTO, EXT1
    case 'M': case 0x83: return 2;                                   // BININT2, EXT2
    case 'J': case 'r': case 'j': case 0x84: return 4;               // BININT, LONG_BINPUT/GET, EXT4
    case 'G': case 0x95: return 8;                                   // BINFLOAT, FRAME
    case 'c': case 'i': *lines = 2; return -1;                       // GLOBAL, INST
    case 'I': case 'L': case 'F': case 'S': case 'V': case 'P': case 'p': case 'g': *lines = 1; return -1;
    case '(': case '.': case '0': case '1': case '2': case 'N': case 'R': case 'a': case 'b': case 'd':
    case '}': case 'e': case 'l': case ']': case 'o': case 's': case 'u': case 't': case ')': case 'Q':
    case 0x81: case 0x85: case 0x86: case 0x87: case 0x88: case 0x89: case 0x8f: case 0x90: case 0x91:
    case 0x92: case 0x93: case 0x94: case 0x97: case 0x98:
      return 0;
    default: return -2;
  }
}

struct ZipCloser {
  void operator()(zip_t* z) const { zip_discard(z); }
};
struct ZipFileCloser {
  void operator()(zip_file_t* f) const { zip_fclose(f); }
};

}  // namespace

Status CheckPickleLengths(const uint8_t* data, size_t size, const std::string& where) {
  size_t at = 0;
  while (at < size) {
    const uint8_t op = data[at];
    const size_t op_at = at++;
    if (op == '.') return Status::Ok();  // STOP
    if (const int field = LengthFieldBytes(op); field > 0) {
      QK_RETURN_IF_NOT(size - at >= static_cast<size_t>(field), StatusCode::kInvalidArgument,
                       "{}: the pickle ends inside the opcode at byte {}", where, op_at);
      const uint64_t length = ReadLittleEndian(data + at, field);
      at += field;
      QK_RETURN_IF_NOT(length <= size - at, StatusCode::kInvalidArgument,
                       "{}: the pickle declares {} bytes at byte {}, {} remain", where, length, op_at, size - at);
      at += length;
      continue;
    }
    int lines = 0;
    const int fixed = FixedArgumentBytes(op, &lines);
    if (fixed == -2) return Status::Ok();  // not an opcode: the unpickler stops there itself
    if (fixed == -1) {
      for (int l = 0; l < lines; ++l) {
        while (at < size && data[at] != '\n') ++at;
        QK_RETURN_IF_NOT(at < size, StatusCode::kInvalidArgument, "{}: unterminated line at byte {}", where, op_at);
        ++at;
      }
      continue;
    }
    QK_RETURN_IF_NOT(size - at >= static_cast<size_t>(fixed), StatusCode::kInvalidArgument,
                     "{}: the pickle ends inside the opcode at byte {}", where, op_at);
    if (op == 'q' || op == 'r' || op == 'h' || op == 'j') {
      // Memo slots are made one per MEMOIZE/PUT, so an index past the pickle's size names none
      // (libtorch sizes its memo table from the index).
      const uint64_t index = ReadLittleEndian(data + at, fixed);
      QK_RETURN_IF_NOT(index < size, StatusCode::kInvalidArgument, "{}: memo index {} at byte {} in a {}-byte pickle",
                       where, index, op_at, size);
    }
    at += fixed;
  }
  return Status::Ok();
}

Status PrecheckCheckpointArchive(const uint8_t* data, size_t size, const std::string& path) {
  zip_error_t error;
  zip_error_init(&error);
  zip_source_t* source = zip_source_buffer_create(data, size, 0, &error);
  QK_RETURN_IF_NOT(source != nullptr, StatusCode::kInvalidArgument, "{}: not a readable QAT checkpoint: {}", path,
                   zip_error_strerror(&error));
  std::unique_ptr<zip_t, ZipCloser> archive(zip_open_from_source(source, ZIP_RDONLY, &error));
  if (archive == nullptr) {
    zip_source_free(source);
    const std::string why = zip_error_strerror(&error);
    zip_error_fini(&error);
    return MakeStatus(StatusCode::kInvalidArgument, "{}: not a readable QAT checkpoint (not a zip archive: {})", path,
                      why);
  }
  zip_error_fini(&error);
  const zip_int64_t entries = zip_get_num_entries(archive.get(), 0);
  for (zip_int64_t i = 0; i < entries; ++i) {
    zip_stat_t st;
    zip_stat_init(&st);
    QK_RETURN_IF_NOT(zip_stat_index(archive.get(), i, 0, &st) == 0 && (st.valid & ZIP_STAT_SIZE) &&
                         (st.valid & ZIP_STAT_NAME),
                     StatusCode::kInvalidArgument, "{}: not a readable QAT checkpoint (record {} unreadable)", path, i);
    const std::string name = st.name;
    QK_RETURN_IF_NOT(st.size <= size, StatusCode::kInvalidArgument,
                     "{}: not a readable QAT checkpoint (record '{}' declares {} bytes in a {}-byte file)", path,
                     name, static_cast<uint64_t>(st.size), size);
    if (name.size() < 4 || name.compare(name.size() - 4, 4, ".pkl") != 0) continue;
    std::unique_ptr<zip_file_t, ZipFileCloser> f(zip_fopen_index(archive.get(), i, 0));
    QK_RETURN_IF_NOT(f != nullptr, StatusCode::kInvalidArgument,
                     "{}: not a readable QAT checkpoint (record '{}': {})", path, name, zip_strerror(archive.get()));
    std::vector<uint8_t> bytes(st.size);
    size_t got = 0;
    while (got < bytes.size()) {
      const zip_int64_t n = zip_fread(f.get(), bytes.data() + got, bytes.size() - got);
      QK_RETURN_IF_NOT(n > 0, StatusCode::kInvalidArgument,
                       "{}: not a readable QAT checkpoint (record '{}' is truncated)", path, name);
      got += static_cast<size_t>(n);
    }
    QK_RETURN_IF_ERROR(CheckPickleLengths(bytes.data(), bytes.size(), path + ": record '" + name + "'"));
  }
  return Status::Ok();
}

}  // namespace quantkit::train
