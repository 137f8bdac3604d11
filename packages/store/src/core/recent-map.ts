/**
 * A bounded map of recently used entries, in two generations: new entries go
 * into the newer one, and when it holds `capacity` it becomes the older and
 * the older is dropped whole; a hit in the older moves into the newer. So it
 * holds between `capacity` and twice that many entries.
 *
 * Why not one Map evicting with `delete(map.keys().next().value)`: V8 leaves a
 * deleted entry as a hole that every new iterator walks past until the table
 * is rehashed, so evicting the oldest entry of a full cache walked up to
 * thousands of holes per insert, about 1 us against 0.1 (measured); a send
 * inserts into several such caches.
 */
export class RecentMap<K, V> {
  private newer = new Map<K, V>();
  private older = new Map<K, V>();

  constructor(private readonly capacity: number) {}

  get(key: K): V | undefined {
    const found = this.newer.get(key);
    if (found !== undefined) return found;
    const old = this.older.get(key);
    if (old !== undefined) this.set(key, old);
    return old;
  }

  set(key: K, value: V): void {
    this.newer.set(key, value);
    if (this.newer.size >= this.capacity) {
      this.older = this.newer;
      this.newer = new Map();
    }
  }

  delete(key: K): void {
    this.newer.delete(key);
    this.older.delete(key);
  }
}
