import java.util.SplittableRandom;

/**
 * Monte-Carlo Pi on one thread as the Java GLB Pi kernel computes it: two doubles a sample
 * from {@code java.util.SplittableRandom} (one 64-bit SplitMix64 word each), a hit where
 * x * x + y * y &lt;= 1; Pi is about 4 * hits / samples.
 *
 * <p>Usage: {@code java Pi SAMPLES [RUNS] [SEED]}. Prints one JSON line: the hits of the last
 * run, the estimate, the 64-bit words drawn (2 a sample) and each run's seconds (the first
 * run includes the JIT's warm-up). Every run uses the same seed, so every run gives the same
 * hits.
 */
public final class Pi {
    private Pi() {
    }

    /** Hits among {@code samples} points drawn from a generator seeded with {@code seed}. */
    static long hits(long samples, long seed) {
        SplittableRandom random = new SplittableRandom(seed);
        long hits = 0;
        for (long i = 0; i < samples; i++) {
            double x = random.nextDouble();
            double y = random.nextDouble();
            if (x * x + y * y <= 1.0) {
                hits++;
            }
        }
        return hits;
    }

    public static void main(String[] args) {
        long samples = (long) Double.parseDouble(args[0]);
        int runs = args.length > 1 ? Integer.parseInt(args[1]) : 3;
        long seed = args.length > 2 ? Long.parseLong(args[2]) : 42;
        long hits = 0;
        StringBuilder times = new StringBuilder();
        for (int r = 0; r < runs; r++) {
            long t = System.nanoTime();
            hits = hits(samples, seed);
            double s = (System.nanoTime() - t) / 1e9;
            times.append(r == 0 ? "" : ", ").append(s);
        }
        System.out.println("{\"kernel\": \"pi\", \"samples\": " + samples + ", \"result\": "
                + hits + ", \"pi\": " + (4.0 * hits / samples) + ", \"words\": " + 2 * samples
                + ", \"runs_s\": [" + times + "], \"java\": \""
                + System.getProperty("java.vm.version") + "\"}");
    }
}
