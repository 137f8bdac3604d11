import { hash } from "node:crypto";

// fatal: a stored string that is not valid UTF-8 was not written by this store.
const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * UTF-8 of `value` (a lone surrogate as U+FFFD, as TextEncoder writes it), in
 * Node's shared pool outside the JS heap like concatBytes. TextEncoder.encode
 * gives every call its own ArrayBuffer, which costs more than a pooled
 * Buffer.from for the many short ids a send encodes.
 */
export function encodeUtf8(value: string): Uint8Array {
  const pooled = Buffer.from(value, "utf8");
  return new Uint8Array(pooled.buffer, pooled.byteOffset, pooled.length);
}

/** Throws a TypeError on invalid UTF-8; callers turn it into StoreError CORRUPT. */
export function decodeUtf8(bytes: Uint8Array): string {
  return strictUtf8.decode(bytes);
}

/**
 * The parts one after the other, in memory outside the JS heap (a slice of
 * Node's shared pool for small sizes). V8 keeps a small `new Uint8Array(n)`
 * on its heap and must move it out the first time native code (LevelDB) or a
 * DataView touches its buffer; keys and records all go to LevelDB, so they
 * are allocated outside from the start.
 */
export function concatBytes(parts: readonly Uint8Array[]): Uint8Array {
  let length = 0;
  for (const part of parts) length += part.length;
  // Unsafe (not zeroed) is fine: every byte is written below.
  const pooled = Buffer.allocUnsafe(length);
  const out = new Uint8Array(pooled.buffer, pooled.byteOffset, length);
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

export function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const d = a[i]! - b[i]!;
    if (d !== 0) return d;
  }
  return a.length - b.length;
}

/**
 * One-shot (no Hash object per call): every send hashes its thread, task, message id and payload.
 * As hex, then its bytes: see sha256Hex.
 */
export function sha256(data: Uint8Array): Uint8Array {
  return fromHex(sha256Hex(data));
}

/**
 * SHA-256 of bytes or of a string's UTF-8, as lowercase hex. A string result costs less than a Buffer one:
 * node:crypto makes a Buffer outside its pool.
 */
export function sha256Hex(data: string | Uint8Array): string {
  return hash("sha256", data, "hex");
}

/** The bytes of lowercase hex (two digits each), in Node's shared pool like concatBytes. */
export function fromHex(hex: string): Uint8Array {
  const pooled = Buffer.from(hex, "hex");
  return new Uint8Array(pooled.buffer, pooled.byteOffset, pooled.length);
}

/** Size of a slab that longLivedFromHex cuts from: 128 digests. */
const LONG_LIVED_SLAB_BYTES = 4_096;
let longLivedSlab = Buffer.allocUnsafeSlow(LONG_LIVED_SLAB_BYTES);
let longLivedOffset = 0;

/**
 * The bytes of lowercase hex, for bytes that are kept (the cached digests of digests.ts): cut from slabs of
 * their own, not Node's shared pool. A slice of the pool keeps its whole 8 KB slab alive, and the pool hands out
 * a send's short-lived keys and records in between, so the few digests a send caches would keep slabs of garbage
 * alive outside the JS heap. These slabs hold only such bytes, made one after the other, so a cache generation
 * evicted at once frees its slabs.
 */
export function longLivedFromHex(hex: string): Uint8Array {
  const length = hex.length >>> 1;
  if (longLivedOffset + length > longLivedSlab.length) {
    longLivedSlab = Buffer.allocUnsafeSlow(Math.max(LONG_LIVED_SLAB_BYTES, length));
    longLivedOffset = 0;
  }
  const written = longLivedSlab.write(hex, longLivedOffset, "hex");
  if (written !== length || hex.length !== 2 * length) throw new RangeError("not hex of whole bytes");
  const out = new Uint8Array(longLivedSlab.buffer, longLivedSlab.byteOffset + longLivedOffset, length);
  longLivedOffset += length;
  return out;
}

export function toHex(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).toString("hex");
}

function checkU64(value: number): void {
  if (!Number.isInteger(value) || value < 0 || value >= 2 ** 64) throw new RangeError(`not a u64: ${value}`);
}

/** Unsigned 64-bit big-endian, so byte order equals numeric order for safe integers. */
export function u64(value: number): Uint8Array {
  return new ByteWriter(8).u64(value).done();
}

export function readU64(bytes: Uint8Array, offset: number): number {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
  const value = view.getBigUint64(offset);
  if (value > BigInt(Number.MAX_SAFE_INTEGER)) throw new RangeError(`u64 at ${offset} exceeds the safe integer range`);
  return Number(value);
}

export function u32(value: number): Uint8Array {
  return Uint8Array.of(value >>> 24, (value >>> 16) & 0xff, (value >>> 8) & 0xff, value & 0xff);
}

/**
 * The UTF-8 of `fields`, each after its length (u32 big-endian), one after the
 * other. Unlike concatenation, no two different field lists produce the same
 * bytes, which is what makes ("tenant/a", "x") and ("tenant", "/ax") distinct.
 * Written in place: one allocation, where encoding each field and then joining
 * them allocated each field, each length and the whole again.
 */
export function lengthPrefixedUtf8(fields: readonly string[]): Uint8Array {
  return new ByteWriter(utf8FieldsLength(fields)).utf8Fields(fields).done();
}

/** The bytes lengthPrefixedUtf8 (or ByteWriter.utf8Fields) writes for `fields`. */
export function utf8FieldsLength(fields: readonly string[]): number {
  let length = 0;
  for (const field of fields) length += 4 + Buffer.byteLength(field, "utf8");
  return length;
}

/**
 * Writes a key or record of a known length into one buffer from Node's shared
 * pool (outside the JS heap, like concatBytes), field after field: the numbers
 * go in place instead of each becoming its own Uint8Array first, garbage as
 * soon as it is copied into the whole.
 * `done` checks that exactly `length` bytes were written.
 */
export class ByteWriter {
  private offset = 0;
  private readonly buffer: Buffer;
  constructor(private readonly length: number) {
    // Unsafe (not zeroed) is fine: done() refuses a record with a byte left unwritten.
    this.buffer = Buffer.allocUnsafe(length);
  }
  u8(value: number): this {
    this.buffer.writeUInt8(value, this.offset);
    this.offset += 1;
    return this;
  }
  u32(value: number): this {
    this.buffer.writeUInt32BE(value, this.offset);
    this.offset += 4;
    return this;
  }
  /** Unsigned 64-bit big-endian, so byte order equals numeric order for safe integers. */
  u64(value: number): this {
    checkU64(value);
    this.buffer.writeUInt32BE(Math.floor(value / 0x1_0000_0000), this.offset);
    this.buffer.writeUInt32BE(value >>> 0, this.offset + 4);
    this.offset += 8;
    return this;
  }
  bytes(data: Uint8Array): this {
    if (this.offset + data.length > this.length) throw new RangeError("write past the record's length");
    this.buffer.set(data, this.offset);
    this.offset += data.length;
    return this;
  }
  /** The fields as lengthPrefixedUtf8 writes them. */
  utf8Fields(fields: readonly string[]): this {
    for (const field of fields) {
      const written = this.buffer.write(field, this.offset + 4, "utf8");
      this.buffer.writeUInt32BE(written, this.offset);
      this.offset += 4 + written;
    }
    return this;
  }
  done(): Uint8Array {
    if (this.offset !== this.length) throw new RangeError(`wrote ${this.offset} of ${this.length} bytes`);
    return new Uint8Array(this.buffer.buffer, this.buffer.byteOffset, this.length);
  }
}

/** Reads fields written by a record writer; every read is bounds-checked. */
export class ByteReader {
  private offset = 0;
  private readonly view: DataView;
  constructor(private readonly data: Uint8Array) {
    this.view = new DataView(data.buffer, data.byteOffset, data.length);
  }
  private need(n: number): void {
    if (this.offset + n > this.data.length) throw new RangeError("record truncated");
  }
  u8(): number {
    this.need(1);
    return this.view.getUint8(this.offset++);
  }
  u32(): number {
    this.need(4);
    const v = this.view.getUint32(this.offset);
    this.offset += 4;
    return v;
  }
  u64(): number {
    this.need(8);
    const v = readU64(this.data, this.offset);
    this.offset += 8;
    return v;
  }
  bytes(n: number): Uint8Array {
    this.need(n);
    const out = this.data.subarray(this.offset, this.offset + n);
    this.offset += n;
    return out;
  }
  string(): string {
    return decodeUtf8(this.bytes(this.u32()));
  }
  /** Everything left, as a plain Uint8Array view (not a Buffer), so callers see exact bytes. */
  rest(): Uint8Array {
    const out = new Uint8Array(this.data.buffer, this.data.byteOffset + this.offset, this.data.length - this.offset);
    this.offset = this.data.length;
    return out;
  }
  end(): void {
    if (this.offset !== this.data.length) throw new RangeError("record has trailing bytes");
  }
}
