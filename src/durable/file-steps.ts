import {
  closeSync,
  fsync,
  fsyncSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  write,
  writeSync,
} from 'node:fs'
import { type FileHandle, open } from 'node:fs/promises'
import { dirname } from 'node:path'
import { promisify } from 'node:util'

/**
 * The file system steps that make a write durable, shared by the service's journal and the
 * client's file storage: a write at a position to its last byte, the atomic replacement of a file
 * (a temporary file, fsync, rename, fsync of the directory, as SQLite commits and Redis rewrites
 * its AOF) and the directory fsync that makes a rename or a new file's name survive a crash.
 */

const writeAt = promisify(write)
const fullSync = promisify(fsync)

/** Writes all of `bytes` at `position` (a write may take fewer bytes than asked). */
export async function writeAll(fd: number, bytes: Buffer, position: number): Promise<void> {
  for (let done = 0; done < bytes.length; ) {
    const { bytesWritten } = await writeAt(fd, bytes, done, bytes.length - done, position + done)
    done += bytesWritten
  }
}

/**
 * Fsyncs the directory of `path`, after a rename or a create there. Some file systems refuse to
 * fsync a directory: that is ignored, the rename stands.
 */
export function syncDirectory(path: string): void {
  try {
    const fd = openSync(dirname(path), 'r')
    try {
      fsyncSync(fd)
    } finally {
      closeSync(fd)
    }
  } catch {
    // Some file systems refuse to fsync a directory; the rename stands.
  }
}

/**
 * Fsyncs the directory `folder` itself (not the one it is in), without blocking the event loop:
 * after a rename or a create in it. A refusal is ignored, as syncDirectory ignores it.
 */
export async function syncFolder(folder: string): Promise<void> {
  let handle: FileHandle | undefined
  try {
    handle = await open(folder, 'r')
    await handle.sync()
  } catch {
    // Some file systems refuse to fsync a directory; the rename stands.
  } finally {
    await handle?.close().catch(() => {})
  }
}

/** Writes `path` whole, atomically, and closes it: `path.tmp`, fsync, rename, directory fsync. */
export function replaceFileSync(path: string, frames: readonly Buffer[]): void {
  const tmp = `${path}.tmp`
  const fd = openSync(tmp, 'w')
  try {
    for (const frame of frames) writeSync(fd, frame)
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
  renameSync(tmp, path)
  syncDirectory(path)
}

/**
 * Writes `path` whole, atomically (`path.tmp`, fsync, rename, directory fsync), and returns the
 * descriptor of the new file, open for writing at its end (the caller closes its old one). When a
 * step before the rename fails, `path` is untouched, the temporary file removed, and the error
 * thrown; nothing after the rename throws.
 */
export async function replaceFile(path: string, bytes: Buffer): Promise<number> {
  const tmp = `${path}.tmp`
  let fd: number | undefined
  try {
    fd = openSync(tmp, 'w')
    await writeAll(fd, bytes, 0)
    await fullSync(fd)
    renameSync(tmp, path)
  } catch (err) {
    if (fd !== undefined) closeSync(fd)
    rmSync(tmp, { force: true })
    throw err
  }
  syncDirectory(path)
  return fd
}

/** The bytes of `path`, none when it is absent. */
export function readIfThere(path: string): Buffer {
  try {
    return readFileSync(path)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return Buffer.alloc(0)
    throw err
  }
}
