/**
 * A bounded map of recently used entries, in two generations: new entries go
 * into the newer one, and when it holds `capacity` it becomes the older and
 * the older is dropped whole; a hit in the older moves into the newer. So it
 * holds between `capacity` and twice that many entries.
 *
 * Why not one Map evicting with `delete(map.keys().next().value)`: V8 leaves a
 * deleted entry as a hole that every new iterator walks past until the table
 * is rehashed, so evicting the oldest entry of a full cache walks the holes
 * of the earlier evictions on every insert; a send inserts into several such
 * caches.
 */
export class RecentMap<K, V> {
  private newer = new Map<K, V>();
  private older = new Map<K, V>();

  /**
   * `onDrop` hears of each entry forgotten when the older generation goes (an entry moved or set into the newer
   * one since is not forgotten), for tables that must act on what they forget.
   */
  constructor(
    private readonly capacity: number,
    private readonly onDrop?: (key: K, value: V) => void,
  ) {}

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
      const dropped = this.older;
      this.older = this.newer;
      this.newer = new Map();
      if (this.onDrop) for (const [k, v] of dropped) if (!this.older.has(k)) this.onDrop(k, v);
    }
  }

  delete(key: K): void {
    this.newer.delete(key);
    this.older.delete(key);
  }
}

/**
 * A RecentMap keyed by two strings, held as a map of maps, for keys made of
 * two ids (tenant and contextId, say): a lookup hashes the caller's own
 * strings, whose hashes V8 keeps in the string, where one joined key is a new
 * string hashed in full on every lookup. `capacity` counts entries, not firsts.
 */
export class RecentPairMap<V> {
  private newer = new Map<string, Map<string, V>>();
  private older = new Map<string, Map<string, V>>();
  private newerSize = 0;

  constructor(private readonly capacity: number) {}

  get(first: string, second: string): V | undefined {
    const found = this.newer.get(first)?.get(second);
    if (found !== undefined) return found;
    const old = this.older.get(first)?.get(second);
    if (old !== undefined) this.set(first, second, old);
    return old;
  }

  set(first: string, second: string, value: V): void {
    let inner = this.newer.get(first);
    if (inner === undefined) {
      inner = new Map();
      this.newer.set(first, inner);
    }
    const before = inner.size;
    inner.set(second, value);
    if (inner.size > before && ++this.newerSize >= this.capacity) {
      this.older = this.newer;
      this.newer = new Map();
      this.newerSize = 0;
    }
  }
}
