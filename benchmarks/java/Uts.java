import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;

/**
 * UTS geometric tree (branching factor 4), counted on one thread as the Java LifelineGLB UTS
 * kernel counts it: one {@code java.security.MessageDigest} SHA-1 per hashed node.
 *
 * <p>Root digest: SHA-1 of 16 zero bytes and the seed as 4 big-endian bytes. A child's
 * digest: SHA-1 of its parent's 20-byte digest and the child index as 4 big-endian bytes.
 * Child count: v = bytes 16..19 of the digest, big-endian, top bit cleared;
 * n = floor(ln(1 - v / 2^31) / ln(4/5)). The root has depth budget d; a node with budget 1
 * counts its n children without hashing them; a node with budget k &gt; 1 hashes its children
 * and expands them with budget k - 1. Result: nodes, root included.
 *
 * <p>Usage: {@code java Uts DEPTH [SEED] [RUNS]}. Prints one JSON line: the node count and
 * the seconds of each run (the first one includes the JIT's warm-up).
 */
public final class Uts {
    private static final double DEN = Math.log(4.0 / 5.0);

    private final MessageDigest md;
    // The bag, laid out as the Java GLB UTS bag: entry i is a node whose children
    // lower[i] .. upper[i] - 1 are still to be generated, with its digest at 20 * i and the
    // depth budget of those children.
    private byte[] hash = new byte[20 * 1024];
    private int[] budget = new int[1024];
    private int[] lower = new int[1024];
    private int[] upper = new int[1024];
    private int size;

    private Uts() throws NoSuchAlgorithmException {
        md = MessageDigest.getInstance("SHA-1");
    }

    /** The child count of the node whose digest is at {@code hash[off .. off + 19]}. */
    private static int children(byte[] d, int off) {
        int v = ((d[off + 16] & 0x7f) << 24) | ((d[off + 17] & 0xff) << 16)
                | ((d[off + 18] & 0xff) << 8) | (d[off + 19] & 0xff);
        return (int) Math.floor(Math.log(1.0 - v / 2147483648.0) / DEN);
    }

    /**
     * Files the node whose digest sits in slot {@code size} (budget {@code k}): returns its
     * child count; pushes it as an entry when it has children to hash (k &gt; 1).
     */
    private int push(int k) {
        int n = children(hash, 20 * size);
        if (k > 1 && n > 0) {
            budget[size] = k - 1;
            lower[size] = 0;
            upper[size] = n;
            size++;
            if (20 * (size + 1) > hash.length) {
                hash = Arrays.copyOf(hash, hash.length * 2);
                budget = Arrays.copyOf(budget, budget.length * 2);
                lower = Arrays.copyOf(lower, lower.length * 2);
                upper = Arrays.copyOf(upper, upper.length * 2);
            }
        }
        return n;
    }

    /** Nodes of the tree of seed {@code seed} and depth budget {@code depth} (at least 1). */
    long count(int seed, int depth) throws Exception {
        size = 0;
        md.update(new byte[16]);
        md.update(new byte[] {(byte) (seed >>> 24), (byte) (seed >>> 16), (byte) (seed >>> 8),
                              (byte) seed});
        md.digest(hash, 0, 20);
        long nodes = 1 + push(depth);
        while (size > 0) {
            // Generate one child of the top entry: the GLB UTS kernel's expand().
            int top = size - 1;
            int i = lower[top]++;
            int k = budget[top];
            md.update(hash, 20 * top, 20);
            md.update((byte) (i >>> 24));
            md.update((byte) (i >>> 16));
            md.update((byte) (i >>> 8));
            md.update((byte) i);
            if (lower[top] == upper[top]) {
                size--;  // the parent is done: its child takes its slot
                md.digest(hash, 20 * top, 20);
            } else {
                md.digest(hash, 20 * size, 20);
            }
            nodes += push(k);
        }
        return nodes;
    }

    public static void main(String[] args) throws Exception {
        int depth = Integer.parseInt(args[0]);
        int seed = args.length > 1 ? Integer.parseInt(args[1]) : 19;
        int runs = args.length > 2 ? Integer.parseInt(args[2]) : 3;
        Uts uts = new Uts();
        long nodes = 0;
        StringBuilder times = new StringBuilder();
        for (int r = 0; r < runs; r++) {
            long t = System.nanoTime();
            nodes = uts.count(seed, depth);
            double s = (System.nanoTime() - t) / 1e9;
            times.append(r == 0 ? "" : ", ").append(s);
        }
        System.out.println("{\"kernel\": \"uts\", \"seed\": " + seed + ", \"depth\": " + depth
                + ", \"result\": " + nodes + ", \"runs_s\": [" + times + "], \"java\": \""
                + System.getProperty("java.vm.version") + "\"}");
    }
}
