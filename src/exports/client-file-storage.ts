/** notes-service/client/file-storage: notes-service-client/file-storage under the service's name. */
export * from 'notes-service-client/file-storage'
