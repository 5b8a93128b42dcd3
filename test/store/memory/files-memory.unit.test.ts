import type { Role } from '../../../src/store/directory.js'
import { Capacity } from '../../../src/store/kernel/capacity.js'
import { FileRoom } from '../../../src/store/memory/file-room.js'
import { MemoryFiles } from '../../../src/store/memory/memory-files.js'
import { type FileSpaceOptions, runFileContract } from '../../support/files.contract.js'

/** Memory files as the contract makes them, with `room` when they share a store's byte cap. */
function madeWith(options: FileSpaceOptions, room?: FileRoom) {
  const roles = new Map<string, Role>()
  const space = new MemoryFiles({
    ...options,
    roleOf: (nb, user) => roles.get(`${nb}\n${user}`),
    ...(room === undefined ? {} : { room }),
  })
  return {
    space,
    setRole(nb: string, user: string, role: Role | undefined) {
      if (role === undefined) roles.delete(`${nb}\n${user}`)
      else roles.set(`${nb}\n${user}`, role)
    },
    dropNotebook: (nb: string) => space.drop(nb),
  }
}

runFileContract('MemoryFiles', (options) => madeWith(options))
// Beside a memory store whose byte cap is roomy, the files behave exactly as alone.
runFileContract('MemoryFiles beside a memory store', (options) =>
  madeWith(options, new FileRoom(new Capacity(100, 1 << 30, 'The store'))),
)
