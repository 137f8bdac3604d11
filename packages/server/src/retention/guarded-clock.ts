/**
 * The clock of retention decisions: the wall clock, but never ahead of the wall time last observed plus the time
 * the process measured since (a monotonic clock). A system clock set forward therefore cannot age a thread: after
 * such a jump retention runs on the process's own elapsed time (threads are kept longer by the jump, never deleted
 * early). A clock set back is followed at once (that only keeps threads longer).
 */
export function createGuardedClock(wall: () => number, monotonic: () => number): () => number {
  let anchorWall = wall();
  let anchorMono = monotonic();
  return () => {
    const now = wall();
    const mono = monotonic();
    const measured = anchorWall + (mono - anchorMono);
    if (now <= measured) {
      anchorWall = now;
      anchorMono = mono;
      return now;
    }
    // Whole milliseconds, as Date.now gives: stored times and listing keys take integers.
    return Math.floor(measured);
  };
}
