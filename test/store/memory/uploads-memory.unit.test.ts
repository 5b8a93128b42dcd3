import { MemoryUploads } from '../../../src/store/memory/memory-uploads.js'
import { runUploadContract } from '../../support/uploads.contract.js'

runUploadContract('MemoryUploads', () => ({ staging: new MemoryUploads() }))
