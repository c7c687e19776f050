#include "store/sqlite_wal_vfs.h"

#include <sqlite3.h>

#include <algorithm>
#include <cstddef>
#include <new>
#include <vector>

namespace dsh::store {
namespace {

constexpr size_t kMaxGathered = size_t{4} << 20;
// The default (unix) VFS writes at most 128 KiB - 1 bytes per call (it masks
// the length to 17 bits), so gathered writes reach it in pieces below that.
constexpr size_t kWritePiece = 124 * 1024;

sqlite3_vfs* Base(sqlite3_vfs* vfs) { return static_cast<sqlite3_vfs*>(vfs->pAppData); }

// A WAL file: this header, then the default VFS's file in the same
// allocation (SQLite allocates `szOsFile` bytes per file).
struct WalFile {
  sqlite3_file file;  // first: SQLite sees this; pMethods is kWalMethods
  sqlite3_file* base;
  std::vector<char>* gathered;  // contiguous writes not in the file yet
  sqlite3_int64 gathered_at;    // the file offset of gathered[0]
};

constexpr int kWalFileSize = (sizeof(WalFile) + 7) & ~7;

WalFile* Wal(sqlite3_file* f) { return reinterpret_cast<WalFile*>(f); }
sqlite3_file* Base(sqlite3_file* f) { return Wal(f)->base; }

int Flush(WalFile* f) {
  std::vector<char>& g = *f->gathered;
  int rc = SQLITE_OK;
  for (size_t done = 0; done < g.size() && rc == SQLITE_OK; done += kWritePiece) {
    size_t n = std::min(kWritePiece, g.size() - done);
    rc = f->base->pMethods->xWrite(f->base, g.data() + done, static_cast<int>(n),
                                   f->gathered_at + static_cast<sqlite3_int64>(done));
  }
  g.clear();  // on failure too: SQLite fails the transaction and writes its frames again
  return rc;
}

int Write(sqlite3_file* file, const void* data, int n, sqlite3_int64 at) {
  WalFile* f = Wal(file);
  std::vector<char>& g = *f->gathered;
  if (!g.empty() && at != f->gathered_at + static_cast<sqlite3_int64>(g.size())) {
    if (int rc = Flush(f); rc != SQLITE_OK) return rc;
  }
  if (g.empty()) f->gathered_at = at;
  try {
    const char* p = static_cast<const char*>(data);
    g.insert(g.end(), p, p + n);
  } catch (const std::bad_alloc&) {
    if (int rc = Flush(f); rc != SQLITE_OK) return rc;
    return f->base->pMethods->xWrite(f->base, data, n, at);
  }
  return g.size() >= kMaxGathered ? Flush(f) : SQLITE_OK;
}

// Every other use of the file sees what was written before it.
template <typename Op>
int AfterFlush(sqlite3_file* file, Op op) {
  if (int rc = Flush(Wal(file)); rc != SQLITE_OK) return rc;
  return op(Base(file));
}

int Close(sqlite3_file* file) {
  WalFile* f = Wal(file);
  int flushed = Flush(f);
  int rc = f->base->pMethods->xClose(f->base);
  delete f->gathered;
  f->gathered = nullptr;
  return flushed != SQLITE_OK ? flushed : rc;
}

int Read(sqlite3_file* file, void* out, int n, sqlite3_int64 at) {
  return AfterFlush(file, [&](sqlite3_file* b) { return b->pMethods->xRead(b, out, n, at); });
}
int Truncate(sqlite3_file* file, sqlite3_int64 size) {
  return AfterFlush(file, [&](sqlite3_file* b) { return b->pMethods->xTruncate(b, size); });
}
int Sync(sqlite3_file* file, int flags) {
  return AfterFlush(file, [&](sqlite3_file* b) { return b->pMethods->xSync(b, flags); });
}
int FileSize(sqlite3_file* file, sqlite3_int64* size) {
  return AfterFlush(file, [&](sqlite3_file* b) { return b->pMethods->xFileSize(b, size); });
}
int FileControl(sqlite3_file* file, int op, void* arg) {
  return AfterFlush(file, [&](sqlite3_file* b) { return b->pMethods->xFileControl(b, op, arg); });
}
int Lock(sqlite3_file* file, int level) { return Base(file)->pMethods->xLock(Base(file), level); }
int Unlock(sqlite3_file* file, int level) { return Base(file)->pMethods->xUnlock(Base(file), level); }
int CheckReservedLock(sqlite3_file* file, int* out) {
  return Base(file)->pMethods->xCheckReservedLock(Base(file), out);
}
int SectorSize(sqlite3_file* file) { return Base(file)->pMethods->xSectorSize(Base(file)); }
int DeviceCharacteristics(sqlite3_file* file) {
  return Base(file)->pMethods->xDeviceCharacteristics(Base(file));
}
// SQLite uses shared memory and memory maps of the database file only, never
// of a WAL file; these forward for completeness.
int ShmMap(sqlite3_file* file, int region, int size, int extend, void volatile** out) {
  return Base(file)->pMethods->xShmMap(Base(file), region, size, extend, out);
}
int ShmLock(sqlite3_file* file, int offset, int n, int flags) {
  return Base(file)->pMethods->xShmLock(Base(file), offset, n, flags);
}
void ShmBarrier(sqlite3_file* file) { Base(file)->pMethods->xShmBarrier(Base(file)); }
int ShmUnmap(sqlite3_file* file, int remove) { return Base(file)->pMethods->xShmUnmap(Base(file), remove); }

const sqlite3_io_methods kWalMethods = {
    2,  // no xFetch/xUnfetch: SQLite reads a WAL file with xRead only
    Close,       Read,        Write,      Truncate, Sync,    FileSize,
    Lock,        Unlock,      CheckReservedLock,    FileControl, SectorSize, DeviceCharacteristics,
    ShmMap,      ShmLock,     ShmBarrier, ShmUnmap, nullptr, nullptr,
};

int Open(sqlite3_vfs* vfs, const char* name, sqlite3_file* file, int flags, int* out_flags) {
  sqlite3_vfs* base = Base(vfs);
  if ((flags & SQLITE_OPEN_WAL) == 0) return base->xOpen(base, name, file, flags, out_flags);
  WalFile* f = Wal(file);
  f->file.pMethods = nullptr;  // until it is open: SQLite then does not call xClose
  f->base = reinterpret_cast<sqlite3_file*>(reinterpret_cast<char*>(file) + kWalFileSize);
  f->gathered = nullptr;
  int rc = base->xOpen(base, name, f->base, flags, out_flags);
  if (rc != SQLITE_OK) {
    if (f->base->pMethods != nullptr) f->base->pMethods->xClose(f->base);
    return rc;
  }
  f->gathered = new (std::nothrow) std::vector<char>();
  if (f->gathered == nullptr) {
    f->base->pMethods->xClose(f->base);
    return SQLITE_NOMEM;
  }
  f->file.pMethods = &kWalMethods;
  return SQLITE_OK;
}

// Everything else is the default VFS's.
int Delete(sqlite3_vfs* vfs, const char* name, int sync_dir) { return Base(vfs)->xDelete(Base(vfs), name, sync_dir); }
int Access(sqlite3_vfs* vfs, const char* name, int flags, int* out) {
  return Base(vfs)->xAccess(Base(vfs), name, flags, out);
}
int FullPathname(sqlite3_vfs* vfs, const char* name, int n, char* out) {
  return Base(vfs)->xFullPathname(Base(vfs), name, n, out);
}
void* DlOpen(sqlite3_vfs* vfs, const char* name) { return Base(vfs)->xDlOpen(Base(vfs), name); }
void DlError(sqlite3_vfs* vfs, int n, char* out) { Base(vfs)->xDlError(Base(vfs), n, out); }
void (*DlSym(sqlite3_vfs* vfs, void* lib, const char* symbol))(void) {
  return Base(vfs)->xDlSym(Base(vfs), lib, symbol);
}
void DlClose(sqlite3_vfs* vfs, void* lib) { Base(vfs)->xDlClose(Base(vfs), lib); }
int Randomness(sqlite3_vfs* vfs, int n, char* out) { return Base(vfs)->xRandomness(Base(vfs), n, out); }
int Sleep(sqlite3_vfs* vfs, int us) { return Base(vfs)->xSleep(Base(vfs), us); }
int CurrentTime(sqlite3_vfs* vfs, double* out) { return Base(vfs)->xCurrentTime(Base(vfs), out); }
int GetLastError(sqlite3_vfs* vfs, int n, char* out) { return Base(vfs)->xGetLastError(Base(vfs), n, out); }
int CurrentTimeInt64(sqlite3_vfs* vfs, sqlite3_int64* out) {
  return Base(vfs)->xCurrentTimeInt64(Base(vfs), out);
}

sqlite3_vfs* Register() {
  sqlite3_vfs* base = sqlite3_vfs_find(nullptr);
  if (base == nullptr) return nullptr;
  static sqlite3_vfs vfs = {
      2,  // xCurrentTimeInt64 is the newest method used; no system-call overrides
      kWalFileSize + base->szOsFile,
      base->mxPathname,
      nullptr,
      "dsh-wal",
      base,
      Open,
      Delete,
      Access,
      FullPathname,
      DlOpen,
      DlError,
      DlSym,
      DlClose,
      Randomness,
      Sleep,
      CurrentTime,
      GetLastError,
      CurrentTimeInt64,
      nullptr,
      nullptr,
      nullptr,
  };
  return sqlite3_vfs_register(&vfs, /*makeDflt=*/0) == SQLITE_OK ? &vfs : nullptr;
}

}  // namespace

const char* CoalescingWalVfs() {
  static sqlite3_vfs* vfs = Register();
  return vfs == nullptr ? nullptr : vfs->zName;
}

}  // namespace dsh::store
