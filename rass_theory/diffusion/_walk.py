"""One round of tree speculation, lazy or full expansion, and the next round's drift source.

Both walks return, per trajectory, the committed state, the steps committed, the next round's
frozen velocity, whether that velocity is the exact target velocity at the committed state, and
its drift source (``results.DRIFT_SOURCES``).  Same law, same call count (P9 section 4).  The
kernel's coefficients and the target velocity come from one :class:`~.kernel.PlainKernel`; with a
:class:`~.trajectories.TrajectoryRecorder` every committed state is recorded with the draft mean
and the depth it was committed at.
"""
from __future__ import annotations

import numpy as np

from ._contract import check_result

__all__ = ["RoundWalker"]


def _nearest(children: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Index of the child nearest to ``y`` in Euclidean norm (ties to the lower index)."""
    d2 = np.einsum("nkd,nkd->nk", children - y[:, None, :], children - y[:, None, :])
    return np.argmin(d2, axis=1)


class RoundWalker:
    """Everything a round needs; the two walks share the per-depth verification and the ending."""

    def __init__(self, kernel, draft_model, shape, verifiers, rng, *, prefetch, evaluate_leaves,
                 record=True, recorder=None):
        self.kernel = kernel
        self.draft_model = draft_model
        self.schedule = kernel.schedule
        self.shape = shape
        self.verifiers = verifiers
        self.rng = rng
        self.prefetch = prefetch
        self.evaluate_leaves = evaluate_leaves
        self.record = record
        self.recorder = recorder

    # ------------------------------------------------------------------ shared pieces
    def draft_velocity(self, y, kk, v_frozen):
        if self.draft_model is None:
            return v_frozen
        return self.draft_model.velocity(y, self.kernel.s[kk])

    def verify(self, j, y, kk, u_target, u_draft, children_fn, round_ids, node_rows):
        """Verify the children of nodes ``y`` (rows at depth ``j``, steps ``kk``)."""
        kernel = self.kernel
        Kj = self.shape.widths[j]
        mu_t = kernel.affine(kk, y, u_target)
        mu_d = kernel.affine(kk, y, u_draft)
        sig = kernel.std(kk)
        children = children_fn(mu_d, sig)
        res = self.verifiers[Kj](children, mu_d, mu_t, sig, self.rng)
        states, accepted, idx = check_result(res, children)
        if self.record:
            sig_rows = np.broadcast_to(np.asarray(sig, dtype=float), (y.shape[0],))
            delta = np.linalg.norm(mu_t - mu_d, axis=1) / sig_rows
            mu_ratio = np.linalg.norm(mu_d, axis=1) / sig_rows
            node_rows.append((round_ids, np.full(y.shape[0], j), kk, delta, accepted, np.full(y.shape[0], Kj),
                              sig_rows.copy(), mu_ratio))
        return children, states, accepted, idx, mu_d

    def _ending(self, rows, j, depth_eff, accepted, children, y_new, v_node, child_velocity, out):
        """Record the next drift for rows that stop after verifying depth ``j``.

        ``child_velocity(sel, idx)`` returns the target velocity of child ``idx`` of the selected
        rows (from the batch under full expansion; computed uncounted under lazy expansion).
        """
        v_out, exact_out, src_out = out
        leaf_level = (j + 1 == depth_eff)
        v_out[rows] = v_node
        src_out[rows] = "parent" if self.draft_model is None else "model"
        exact_out[rows] = False
        if self.draft_model is not None:
            return
        children_known = ~leaf_level | self.evaluate_leaves        # children's velocities are in the batch
        leaf = accepted & leaf_level & self.evaluate_leaves
        if leaf.any():                                               # a committed leaf: its own velocity
            sel = np.flatnonzero(leaf)
            v_out[rows[sel]] = child_velocity(sel, None)
            exact_out[rows[sel]] = True
            src_out[rows[sel]] = "leaf"
        if self.prefetch == "nearest":
            near = ~accepted & children_known
            if near.any():
                sel = np.flatnonzero(near)
                idx = _nearest(children[sel], y_new[sel])
                v_out[rows[sel]] = child_velocity(sel, idx)
                src_out[rows[sel]] = "nearest"

    def _level(self, j, w, y, kk, v_node, u_d, children_fn, child_velocity, committed, depth_eff, round_ids,
               traj_ids, node_rows, out):
        """Verify the depth-``j`` nodes of rows ``w``, commit, and record the ending of rows that stop.

        ``child_velocity(stop, children, idx)`` returns the getter that ``_ending`` uses.
        Returns the continue mask over ``w`` and the accepted child indices.
        """
        children, states, accepted, idx, mu_d = self.verify(j, y[w], kk, v_node, u_d, children_fn, round_ids[w],
                                                           node_rows)
        if self.recorder is not None:
            self.recorder.commit(traj_ids[w], kk + 1, states, mu_d, j)
        y[w] = states
        committed[w] += 1
        cont = accepted & (j + 1 < depth_eff[w])
        stop = np.flatnonzero(~cont)
        if stop.size:
            rows = w[stop]
            self._ending(rows, j, depth_eff[rows], accepted[stop], children[stop], y[rows], v_node[stop],
                         child_velocity(stop, children, idx), out)
        return cont, idx

    # ------------------------------------------------------------------ lazy expansion
    def walk_lazy(self, x, k, v_frozen, root_exact, depth_eff, round_ids, traj_ids, node_rows):
        kernel, rng = self.kernel, self.rng
        n, d = x.shape
        y = x.copy()
        committed = np.zeros(n, dtype=np.int64)
        v_node = v_frozen.copy()
        need = ~root_exact
        if need.any():
            v_node[need] = kernel.velocity(k[need], y[need])
        out = (np.empty_like(v_frozen), np.zeros(n, bool), np.empty(n, dtype=object))
        w = np.arange(n)
        j = 0
        while w.size:
            kk = k[w] + j
            Kj = self.shape.widths[j]
            u_d = self.draft_velocity(y[w], kk, v_frozen[w])

            def children_fn(mu_d, sig, Kj=Kj):
                return mu_d[:, None, :] + sig[:, None, None] * rng.standard_normal((mu_d.shape[0], Kj, d))

            def child_velocity(stop, children, idx, kk=kk, w=w):
                def get(sel, cidx):
                    pts = y[w[stop[sel]]] if cidx is None else children[stop[sel], cidx]
                    return kernel.velocity(kk[stop[sel]] + 1, pts)     # uncounted: in the batch on hardware
                return get

            cont, _ = self._level(j, w, y, kk, v_node[w], u_d, children_fn, child_velocity, committed, depth_eff,
                                  round_ids, traj_ids, node_rows, out)
            w = w[cont]
            if w.size:
                v_node[w] = kernel.velocity(k[w] + j + 1, y[w])
            j += 1
        return (y, committed) + out

    # ------------------------------------------------------------------ full expansion
    def walk_full(self, x, k, v_frozen, root_exact, depth_eff, round_ids, traj_ids, node_rows):
        """Draft the tree, ONE batched target call on its internal nodes (and leaves), walk from the root.

        The drafted nodes are written straight into the buffer of the batched call.  Without
        ``evaluate_leaves`` the leaves enter no target call and the walk reads only the children
        of the depth-``L-1`` node it reaches, so those are drafted when that node is verified
        (same law, P9 section 4: noise that is never read need not be drawn); this saves
        ``prod(K)`` of the ``sum_{j>=1} prod_{i<j} K_i`` drafted nodes per tree (64 of 84 at
        K = 4, L = 3).  The target calls are the same.
        """
        kernel, rng, shape = self.kernel, self.rng, self.shape
        n, d = x.shape
        L = shape.depth
        last = kernel.stop - 1
        n_draft = L if self.evaluate_leaves else L - 1          # levels drafted in full before the batch
        # 1. draft every node of every tree down to depth n_draft, level by level, into the batch buffer
        n_lev = n_draft + 1
        sizes = [shape.nodes_at_depth(j) for j in range(n_lev)]
        offsets = np.cumsum([0] + sizes)
        T = int(offsets[-1])
        nodes = np.empty((T, n, d))                          # node-major: each level is a contiguous block
        levels = [nodes[offsets[j]:offsets[j + 1]] for j in range(n_lev)]          # (N_j, n, d) views
        levels[0][0] = x
        for j in range(n_draft):
            Kj = shape.widths[j]
            par = levels[j]                                   # (N_j, n, d)
            Nj = par.shape[0]
            kk = np.minimum(k + j, last)                      # nodes past depth_eff are never used
            rows_first = par.transpose(1, 0, 2)               # (n, N_j, d)
            if self.draft_model is None:                      # a_k y + b_k u_f, u_f shared by the tree
                mu_d = kernel.affine(kk, rows_first, v_frozen[:, None, :])
            else:
                flat = rows_first.reshape(n * Nj, d)
                kk_flat = np.repeat(kk, Nj)
                mu_d = kernel.affine(kk_flat, flat, self.draft_model.velocity(flat, kernel.s[kk_flat]))
            kids = levels[j + 1].view()
            kids.shape = (Nj, Kj, n, d)                       # child c of node p is node p * K_j + c
            rng.standard_normal(out=kids)                     # drafted in place
            kids *= kernel.std(kk)[None, None, :, None]
            kids += mu_d.reshape(n, Nj, d).transpose(1, 0, 2)[:, None]
        # 2. ONE batched target call on all internal nodes (depth 0..L-1), and the leaves if asked
        steps = np.minimum(k[None, :] + np.repeat(np.arange(n_lev), sizes)[:, None], kernel.stop)    # (T, n)
        V = kernel.velocity(steps.reshape(-1), nodes.reshape(T * n, d)).reshape(T, n, d)
        V[0, root_exact] = v_frozen[root_exact]     # the root was already evaluated: reuse, same value
        # 3. walk from the root
        y = x.copy()
        committed = np.zeros(n, dtype=np.int64)
        out = (np.empty_like(v_frozen), np.zeros(n, bool), np.empty(n, dtype=object))
        pos = np.zeros(n, dtype=np.int64)
        w = np.arange(n)
        j = 0
        while w.size:
            kk = k[w] + j
            Kj = shape.widths[j]
            v_node = V[offsets[j] + pos[w], w]
            u_d = v_frozen[w] if self.draft_model is None else self.draft_model.velocity(y[w], kernel.s[kk])
            child_ids = pos[w, None] * Kj + np.arange(Kj)[None, :]

            if j + 1 < len(levels):
                def children_fn(mu_d, sig, w=w, child_ids=child_ids, j=j):
                    return levels[j + 1][child_ids, w[:, None]]
            else:                                             # leaves of the walked node, drafted now
                def children_fn(mu_d, sig, Kj=Kj):
                    kids = rng.standard_normal((mu_d.shape[0], Kj, d))
                    kids *= sig[:, None, None]
                    kids += mu_d[:, None, :]
                    return kids

            def child_velocity(stop, children, idx, w=w, child_ids=child_ids, j=j):
                def get(sel, cidx):
                    c = idx[stop[sel]] if cidx is None else cidx
                    return V[offsets[j + 1] + child_ids[stop[sel], c], w[stop[sel]]]
                return get

            cont, idx = self._level(j, w, y, kk, v_node, u_d, children_fn, child_velocity, committed, depth_eff,
                                    round_ids, traj_ids, node_rows, out)
            pos[w[cont]] = child_ids[cont, idx[cont]]
            w = w[cont]
            j += 1
        return (y, committed) + out
