#pragma once

namespace dsh::store {

// The name of a SQLite VFS, registered on the first call (thread-safe), that
// is SQLite's default VFS except for WAL files: writes that continue where
// the previous one ended are gathered in memory and reach the file as one
// write before anything else uses it (its sync, a read, a size query, a
// truncation, a file control, its close), or once 4 MiB are gathered.
//
// SQLite writes a commit's WAL frames as two writes each (a 24-byte header,
// then the page), so a commit of 15 pages costs 30 system calls; gathered,
// it costs one, and the sync that follows is cheaper too (docs/STORAGE.md,
// "Durability").
//
// Only for connections with `synchronous=FULL` (or EXTRA): there every
// commit syncs the WAL before it publishes the new frames to other
// connections, so they never read a frame that is still in memory. With
// NORMAL a commit publishes frames without syncing, and this VFS must not be
// used.
const char* CoalescingWalVfs();

}  // namespace dsh::store
