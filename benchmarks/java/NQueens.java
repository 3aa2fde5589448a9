/**
 * N-Queens solutions counted on one thread with int arrays, the full tree: no symmetry, no
 * closed form for the last rows, no bitboards.
 *
 * <p>A board is an int array of the columns of the queens placed in its first rows. Boards
 * wait on a stack (depth first); a board of {@code row} queens is expanded by trying each
 * column of row {@code row}, a candidate. Two ways to check a candidate:
 *
 * <ul>
 * <li>{@code glb} (default), the way of the Java GLB kernel, inherited from the BOTS nqueens
 *     benchmark: copy the board with the candidate appended into a new array, then check
 *     every pair of its queens (same column, same diagonal), so the candidate is checked
 *     against every placed queen and the placed queens against each other again;
 * <li>{@code lean}: check the candidate against every placed queen only, and copy the board
 *     only for a valid candidate (about three times faster: a stronger reference).
 * </ul>
 *
 * <p>Usage: {@code java NQueens N [RUNS] [glb|lean]}. Prints one JSON line: the solutions, the valid
 * partial boards visited (placements of k = 1..N non-attacking queens in the first k rows,
 * solutions included, the empty board not), the candidates checked and each run's seconds
 * (the first run includes the JIT's warm-up).
 */
public final class NQueens {
    private final int n;
    private int[][] stack = new int[1024][];  // the boards still to expand (depth first)
    private int size;
    long boards;
    long candidates;

    private NQueens(int n) {
        this.n = n;
    }

    /** Whether a queen in row {@code row}, column {@code col} attacks none of {@code a}'s. */
    private static boolean safe(int[] a, int row, int col) {
        for (int i = 0; i < row; i++) {
            int q = a[i];
            if (q == col || q - col == row - i || col - q == row - i) {
                return false;
            }
        }
        return true;
    }

    /** Whether no two queens of {@code a} attack each other (BOTS nqueens' {@code ok}). */
    private static boolean ok(int[] a) {
        int k = a.length;
        for (int i = 0; i < k; i++) {
            int p = a[i];
            for (int j = i + 1; j < k; j++) {
                int q = a[j];
                if (q == p || q == p - (j - i) || q == p + (j - i)) {
                    return false;
                }
            }
        }
        return true;
    }

    private void push(int[] b) {
        if (size == stack.length) {
            stack = java.util.Arrays.copyOf(stack, 2 * size);
        }
        stack[size++] = b;
    }

    /** The number of solutions; also sets {@link #boards} and {@link #candidates}. */
    long count(boolean lean) {
        long solutions = 0;
        boards = 0;
        candidates = 0;
        size = 0;
        push(new int[0]);
        while (size > 0) {
            int[] a = stack[--size];
            stack[size] = null;
            int row = a.length;
            for (int col = 0; col < n; col++) {
                candidates++;
                int[] b = null;
                if (lean) {
                    if (!safe(a, row, col)) {
                        continue;
                    }
                } else {
                    b = new int[row + 1];
                    System.arraycopy(a, 0, b, 0, row);
                    b[row] = col;
                    if (!ok(b)) {
                        continue;
                    }
                }
                boards++;
                if (row + 1 == n) {
                    solutions++;
                    continue;
                }
                if (b == null) {
                    b = new int[row + 1];
                    System.arraycopy(a, 0, b, 0, row);
                    b[row] = col;
                }
                push(b);
            }
        }
        return solutions;
    }

    public static void main(String[] args) {
        int n = Integer.parseInt(args[0]);
        int runs = args.length > 1 ? Integer.parseInt(args[1]) : 3;
        String mode = args.length > 2 ? args[2] : "glb";
        if (!mode.equals("glb") && !mode.equals("lean")) {
            throw new IllegalArgumentException("mode must be glb or lean, not " + mode);
        }
        NQueens q = new NQueens(n);
        long solutions = 0;
        StringBuilder times = new StringBuilder();
        for (int r = 0; r < runs; r++) {
            long t = System.nanoTime();
            solutions = q.count(mode.equals("lean"));
            double s = (System.nanoTime() - t) / 1e9;
            times.append(r == 0 ? "" : ", ").append(s);
        }
        System.out.println("{\"kernel\": \"nqueens\", \"n\": " + n + ", \"mode\": \"" + mode + "\""
                + ", \"result\": " + solutions
                + ", \"boards\": " + q.boards + ", \"candidates\": " + q.candidates
                + ", \"runs_s\": [" + times + "], \"java\": \""
                + System.getProperty("java.vm.version") + "\"}");
    }
}
