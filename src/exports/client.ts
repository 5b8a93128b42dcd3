/** notes-service/client: the client package, notes-service-client, under the service's name. */
export * from 'notes-service-client'
