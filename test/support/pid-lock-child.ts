import { createInterface } from 'node:readline'
import { releasePidLock, takePidLock } from '../../src/durable/pid-lock.js'

/**
 * A child process for the lock tests (pid-lock-holder.ts). `hold LOCK`: takes the lock,
 * prints 'held PID' (or 'refused PID' naming the holder) and stays until killed. `race`: reads
 * commands from stdin, one a line: 'take LOCK AT' spins until Date.now() reaches AT (so that the
 * children started together take at once) and prints 'won', 'lost PID' or 'refused REASON'; 'release LOCK' prints
 * 'released'.
 */
const refused = (err: unknown) => new Error('refused', { cause: err })
const [mode, lock] = process.argv.slice(2)

if (mode === 'hold' && lock !== undefined) {
  const holder = takePidLock(lock, refused)
  process.stdout.write(holder === undefined ? `held ${process.pid}\n` : `refused ${holder.pid}\n`)
  setInterval(() => {}, 60_000)
} else if (mode === 'race') {
  process.stdout.write('ready\n')
  for await (const line of createInterface({ input: process.stdin })) {
    const [command, path = '', at] = line.split(' ')
    if (command === 'take') {
      const start = Number(at)
      while (performance.timeOrigin + performance.now() < start) {
        // Spinning rather than a timer: a timer fires a millisecond or more late.
      }
      try {
        const holder = takePidLock(path, refused)
        process.stdout.write(holder === undefined ? 'won\n' : `lost ${holder.pid}\n`)
      } catch (err) {
        process.stdout.write(`refused ${(err as Error).cause}\n`)
      }
    } else {
      releasePidLock(path)
      process.stdout.write('released\n')
    }
  }
} else {
  throw new Error('usage: pid-lock-child hold LOCK | race')
}
