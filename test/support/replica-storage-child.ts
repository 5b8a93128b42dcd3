import { FileReplicaStorage } from '../../src/client/replica/file-storage.js'

/**
 * A child process for test/client/replica/replica-storage.test.ts. `write PATH`: writes without
 * end, four writes in flight, printing each write's number once it resolved (the parent kills it
 * with SIGKILL and checks every printed write is in the file). `open PATH`: tries to open the file
 * and prints 'opened' or the error's code.
 */
const [mode, path] = process.argv.slice(2)
if (path === undefined) throw new Error('usage: replica-storage-child write|open PATH')

if (mode === 'open') {
  try {
    const storage = await FileReplicaStorage.open(path)
    process.stdout.write('opened\n')
    await storage.close()
  } catch (err) {
    process.stdout.write(`${(err as { code?: string }).code}\n`)
  }
} else {
  // A small compaction threshold, so that kills also land during compactions.
  const storage = await FileReplicaStorage.open(path, { compactMinBytes: 64 << 10 })
  const body = 'x'.repeat(200)
  let next = 0
  const writeOne = async (): Promise<void> => {
    for (;;) {
      const n = next++
      await storage.write([
        { table: 'outbox', key: String(n).padStart(8, '0'), value: { n, body } },
        { table: 'notes', key: `n:${n % 50}`, value: { n, body } },
      ])
      process.stdout.write(`${n}\n`)
    }
  }
  await Promise.all([writeOne(), writeOne(), writeOne(), writeOne()])
}
