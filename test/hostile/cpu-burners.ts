import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'

/** Processes that keep CPUs busy, so a test sees the scheduling of a loaded machine. */
export interface CpuBurners {
  /** Ends every burner (by its PID) and waits for it to exit. */
  stop(): Promise<void>
}

/**
 * Starts `count` child processes that spin on the CPU. Each stops by itself after `maxMs`, so a
 * test that dies before calling stop() leaves nothing running for long.
 */
export function startCpuBurners(count: number, maxMs: number): CpuBurners {
  const burners: ChildProcess[] = Array.from({ length: count }, () =>
    spawn(
      process.execPath,
      ['-e', `const end = Date.now() + ${maxMs}; while (Date.now() < end);`],
      {
        stdio: 'ignore',
      },
    ),
  )
  return {
    stop: async () => {
      await Promise.all(
        burners.map(async (burner) => {
          if (burner.exitCode !== null || burner.signalCode !== null) return
          const exited = once(burner, 'exit')
          burner.kill('SIGKILL')
          await exited
        }),
      )
    },
  }
}
