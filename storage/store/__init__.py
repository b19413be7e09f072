"""The server's object store (used by `hub`, never by the client): one interface, a directory or S3
behind it (objectstore), and the SigV4 presigning of GET URLs handed to clients (sigv4)."""
