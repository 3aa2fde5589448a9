/**
 * Betweenness centrality of the SSCA2 R-MAT graph on one thread, as the Java GLB BC kernel
 * computes it: Brandes' algorithm from every vertex, one breadth-first search a source,
 * predecessor lists, the dependencies accumulated backwards.
 *
 * <p>The graph: N = 2^scale vertices, M = 8N directed edges, a = 0.55, b = 0.1, c = 0.1,
 * d = 0.25, seed 2. Random numbers: one SplitMix64 stream (state += 0x9e3779b97f4a7c15,
 * output = mix64(state), the murmur3 finaliser), a double is (output &gt;&gt;&gt; 11) * 2^-53.
 * For each bit ib = 0 .. scale - 1 (weight 2^ib), over all M edges at once: M doubles r1, the
 * source bit is 1 where r1 &gt; a + b; M doubles r2, the destination bit is 1 where
 * r2 &gt; (source bit ? c / (c + d) : a / (a + b)). Edges are kept as generated (duplicates
 * and self-loops stay); the out-edges of a vertex keep generation order.
 *
 * <p>Betweenness: unnormalised, endpoints excluded, shortest paths counted with edge
 * multiplicity (sigma[w] += sigma[v] once per edge v -&gt; w with dist[w] = dist[v] + 1).
 * The work measure is the number of those shortest-path (DAG) edges over all sources
 * (31,811,085 at scale 12, 490,845,036 at scale 14): each is used once forward (sigma) and
 * once backward (the dependency).
 *
 * <p>Usage: {@code java Bc SCALE [RUNS] [SEED]}. Prints one JSON line: the sum and the
 * largest of the BC values, the DAG edges and each run's seconds (graph generation excluded;
 * the first run includes the JIT's warm-up).
 */
public final class Bc {
    private static final long GAMMA = 0x9e3779b97f4a7c15L;

    private final int n;
    private final int[] offsets;  // CSR: out-edges of v are targets[offsets[v] .. offsets[v+1])
    private final int[] targets;
    private final int[] predOffsets;  // room for the predecessors of w: in-degree of w
    private final int[] preds;
    private final int[] predCount;
    private final int[] dist;
    private final double[] sigma;
    private final double[] delta;
    private final int[] queue;
    final double[] bc;
    long dagEdges;

    private static long mix64(long z) {
        z = (z ^ (z >>> 33)) * 0xff51afd7ed558ccdL;
        z = (z ^ (z >>> 33)) * 0xc4ceb9fe1a85ec53L;
        return z ^ (z >>> 33);
    }

    Bc(int scale, long seed) {
        n = 1 << scale;
        int m = 8 * n;
        double a = 0.55, b = 0.1, c = 0.1, d = 0.25;
        double ab = a + b, cNorm = c / (c + d), aNorm = a / (a + b);
        int[] src = new int[m];
        int[] dst = new int[m];
        boolean[] sbit = new boolean[m];
        long state = seed;
        for (int ib = 0; ib < scale; ib++) {
            for (int e = 0; e < m; e++) {
                state += GAMMA;
                double r1 = (mix64(state) >>> 11) * 0x1.0p-53;
                sbit[e] = r1 > ab;
                if (sbit[e]) {
                    src[e] += 1 << ib;
                }
            }
            for (int e = 0; e < m; e++) {
                state += GAMMA;
                double r2 = (mix64(state) >>> 11) * 0x1.0p-53;
                if (r2 > (sbit[e] ? cNorm : aNorm)) {
                    dst[e] += 1 << ib;
                }
            }
        }
        offsets = new int[n + 1];
        predOffsets = new int[n + 1];
        for (int e = 0; e < m; e++) {
            offsets[src[e] + 1]++;
            predOffsets[dst[e] + 1]++;
        }
        for (int v = 0; v < n; v++) {
            offsets[v + 1] += offsets[v];
            predOffsets[v + 1] += predOffsets[v];
        }
        targets = new int[m];
        int[] fill = java.util.Arrays.copyOf(offsets, n);
        for (int e = 0; e < m; e++) {  // in edge order: a stable sort on the source
            targets[fill[src[e]]++] = dst[e];
        }
        preds = new int[m];
        predCount = new int[n];
        dist = new int[n];
        java.util.Arrays.fill(dist, -1);
        sigma = new double[n];
        delta = new double[n];
        queue = new int[n];
        bc = new double[n];
    }

    /** Brandes from source {@code s}: adds its dependencies to {@link #bc}. */
    private void source(int s) {
        int head = 0, tail = 0;
        queue[tail++] = s;
        dist[s] = 0;
        sigma[s] = 1.0;
        long edges = 0;
        while (head < tail) {
            int v = queue[head++];
            int dv = dist[v] + 1;
            for (int e = offsets[v], end = offsets[v + 1]; e < end; e++) {
                int w = targets[e];
                if (dist[w] < 0) {
                    dist[w] = dv;
                    queue[tail++] = w;
                }
                if (dist[w] == dv) {
                    sigma[w] += sigma[v];
                    preds[predOffsets[w] + predCount[w]++] = v;
                    edges++;
                }
            }
        }
        dagEdges += edges;
        for (int i = tail - 1; i >= 0; i--) {
            int w = queue[i];
            double coefficient = (1.0 + delta[w]) / sigma[w];
            for (int p = predOffsets[w], end = p + predCount[w]; p < end; p++) {
                int v = preds[p];
                delta[v] += sigma[v] * coefficient;
            }
            if (w != s) {
                bc[w] += delta[w];
            }
        }
        for (int i = 0; i < tail; i++) {  // reset what this source touched
            int w = queue[i];
            dist[w] = -1;
            sigma[w] = 0.0;
            delta[w] = 0.0;
            predCount[w] = 0;
        }
    }

    /** Betweenness from every vertex, into {@link #bc} (cleared first). */
    void run() {
        java.util.Arrays.fill(bc, 0.0);
        dagEdges = 0;
        for (int s = 0; s < n; s++) {
            source(s);
        }
    }

    public static void main(String[] args) {
        int scale = Integer.parseInt(args[0]);
        int runs = args.length > 1 ? Integer.parseInt(args[1]) : 3;
        long seed = args.length > 2 ? Long.parseLong(args[2]) : 2;
        Bc bc = new Bc(scale, seed);
        StringBuilder times = new StringBuilder();
        for (int r = 0; r < runs; r++) {
            long t = System.nanoTime();
            bc.run();
            double s = (System.nanoTime() - t) / 1e9;
            times.append(r == 0 ? "" : ", ").append(s);
        }
        double sum = 0.0, max = 0.0;
        for (double x : bc.bc) {
            sum += x;
            max = Math.max(max, x);
        }
        System.out.println("{\"kernel\": \"bc\", \"scale\": " + scale + ", \"seed\": " + seed
                + ", \"result\": {\"sum\": " + sum + ", \"max\": " + max + ", \"dag_edges\": "
                + bc.dagEdges + "}, \"runs_s\": [" + times + "], \"java\": \""
                + System.getProperty("java.vm.version") + "\"}");
    }
}
