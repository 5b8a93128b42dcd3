import type { Role } from '../../../src/store/directory.js'
import { MemoryFiles } from '../../../src/store/memory/memory-files.js'
import { runFileContract } from '../../support/files.contract.js'

runFileContract('MemoryFiles', (options) => {
  const roles = new Map<string, Role>()
  const space = new MemoryFiles({ ...options, roleOf: (nb, user) => roles.get(`${nb}\n${user}`) })
  return {
    space,
    setRole(nb, user, role) {
      if (role === undefined) roles.delete(`${nb}\n${user}`)
      else roles.set(`${nb}\n${user}`, role)
    },
    dropNotebook: (nb) => space.drop(nb),
  }
})
