// Types of sekka-client (index.js). Ids are BigInt or decimal strings, never Number.

export interface ClientOptions {
  /** sekka servers' RESP addresses: "host:port,host:port" or a list. */
  servers: string | string[];
  /** The servers' server.auth_token, sent with AUTH on each connection. */
  token?: string | null;
  /** Per connection attempt, ms (1000). */
  connectTimeout?: number;
  /** Per command, ms (1000). */
  timeout?: number;
  /** First batch size (1000); adapts within [minBatch (100), maxBatch (100000)]. */
  batch?: number;
  minBatch?: number;
  maxBatch?: number;
  /** A batch should last about this long, ms (1000): shorter doubles it, over twice halves it. */
  targetRefill?: number;
  /** Refill when less than this share of a batch is left (0.5). */
  lowWater?: number;
  /** Buffered ids older than this are dropped, ms (10000). */
  validity?: number;
  /** A failed server is skipped for backoffMin (100) doubling to backoffMax (5000) ms. */
  backoffMin?: number;
  backoffMax?: number;
  /** How long a strict call tries the servers again and again (default 30000 ms). */
  strictWait?: number;
  /** TLS to servers whose certificates this CA file (PEM) signed; 'system': the system's CAs. */
  tlsCaFile?: string;
  /** A client certificate and its key (PEM), for servers that require one. */
  tlsCertFile?: string;
  tlsKeyFile?: string;
}

export interface ClientStats {
  served: number;
  refills: number;
  failovers: number;
  dropped: number;
  buffered: number;
}

export class SekkaError extends Error {}
export class AuthError extends SekkaError {}
export class NoServerError extends SekkaError {}
export class ClosedError extends SekkaError {}

export class Client {
  constructor(options: ClientOptions);
  nextId(): Promise<bigint>;
  nextIdString(): Promise<string>;
  nextIds(n: number): Promise<bigint[]>;
  next(tag: string): Promise<bigint>;
  /** The next strict id of `tag`: one request, larger than every id of the tag got before. */
  strict(tag: string): Promise<bigint>;
  /** `n` consecutive strict ids of `tag`: one request, never buffered. */
  strictBatch(tag: string, n: number): Promise<bigint[]>;
  stats(): ClientStats;
  close(): Promise<void>;
}
