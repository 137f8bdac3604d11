/**
 * A Bloom filter over SHA-256 digests: "certainly not added" or "maybe".
 * The digests are uniform already, so the probe positions are read straight
 * from their bytes (seven 32-bit words), with no hashing of its own.
 *
 * It grows by segments: when the newest segment holds its capacity, a new one
 * of twice the capacity starts, and a lookup asks each (about log2(n / 65 536)
 * of them). At 16 bits per digest of capacity (2 bytes; at most 4 per digest
 * added, with the newest segment's room) and seven probes, a lookup of a
 * digest never added says "maybe" about once in 1 400 per segment.
 *
 * Until `complete()` is called, `mayHold` says "maybe" to everything: a filter
 * that is still being filled from a store cannot yet tell what is not there.
 */
export class DigestFilter {
  private readonly segments: { bits: Uint32Array; mask: number; capacity: number; count: number }[] = [];
  private isComplete = false;

  /** `firstCapacity`: digests the first segment takes before a second (twice as large) starts. */
  constructor(firstCapacity = 65_536) {
    this.grow(firstCapacity);
  }

  /** Whether every digest the filter should hold has been added. */
  get completed(): boolean {
    return this.isComplete;
  }

  complete(): void {
    this.isComplete = true;
  }

  add(digest: Uint8Array): void {
    let last = this.segments.at(-1)!;
    if (last.count >= last.capacity) last = this.grow(last.capacity * 2);
    last.count++;
    for (let o = 0; o < PROBE_BYTES; o += 4) {
      const bit = word(digest, o) & last.mask;
      last.bits[bit >>> 5]! |= 1 << (bit & 31);
    }
  }

  /** False only for a digest that was never added (once complete). */
  mayHold(digest: Uint8Array): boolean {
    if (!this.isComplete) return true;
    for (const s of this.segments) if (holds(s.bits, s.mask, digest)) return true;
    return false;
  }

  /** Bytes the filter's bit arrays take. */
  get bytes(): number {
    let n = 0;
    for (const s of this.segments) n += s.bits.byteLength;
    return n;
  }

  private grow(capacity: number) {
    // 16 bits per digest, rounded up to a power of two so a probe is a mask.
    const size = 2 ** Math.ceil(Math.log2(Math.max(64, capacity * 16)));
    const segment = { bits: new Uint32Array(size / 32), mask: size - 1, capacity, count: 0 };
    this.segments.push(segment);
    return segment;
  }
}

/** Seven probes of four bytes each. */
const PROBE_BYTES = 28;

function word(d: Uint8Array, o: number): number {
  return (d[o]! | (d[o + 1]! << 8) | (d[o + 2]! << 16) | (d[o + 3]! << 24)) >>> 0;
}

function holds(bits: Uint32Array, mask: number, digest: Uint8Array): boolean {
  for (let o = 0; o < PROBE_BYTES; o += 4) {
    const bit = word(digest, o) & mask;
    if ((bits[bit >>> 5]! & (1 << (bit & 31))) === 0) return false;
  }
  return true;
}
