"""nbgrader's real pipeline on planted mistakes: each mistake costs only the points of the part it is in.

For every assignment this builds a course directory in a temporary folder (the instructor copy written by
``tools/make_assignments.py --course-dir``), runs ``nbgrader generate_assignment``, hands in one
"student" submission per planted mistake (the student version with the model solution filled in and
one line changed), runs ``nbgrader autograde`` once for all of them, and reads the per-cell scores from
nbgrader's gradebook. A mistake in part n must cost exactly the points of the cells of part n listed for it
(and of Part 4 of A3, the training run, for a train_epoch that does not learn): the hidden tests of later parts
run on the reference versions of the earlier parts (``vitedu.grading.reference_parts``).

Parts are graded in several cells (the core, then the edges), so a slip at an edge costs only its cell: a
hard-coded d_k, a naive softmax, a -1e9 mask fill, a stride set to the kernel size, norm1 before the MLP, a
model left in eval mode each keep the other cells of their part.

One autograde run per assignment (every submission of it in one batch) keeps this to a few minutes;
A3, which trains for about 15 s per submission, gets four: two slips (train and eval mode), a forgotten
zero_grad and a step before backward (runs that do not learn, which cost Part 4 too; the second submission also
has an evaluate that ignores its split), and a softmax before the loss (a run that learns slowly, which costs
Part 2 only). There is no all-correct submission: every part keeps its full points in most submissions already.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

# nbgrader's whole course cycle (about 2 minutes): not in `make unit`; `make course`, and `make test` under CI
pytestmark = [pytest.mark.nbgrader, pytest.mark.course]

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "notebooks" / "assignments" / "source"

# student -> (assignment, [(solution cell, a line of the model solution, the line with the planted mistake)],
#             the graded cells that must lose their points; every other graded cell keeps all of them)
W1, W1G = "test_attention_weights", "test_attention_weights_general"
AT, ATG = "test_attention", "test_attention_general"
MASK, MASK_EMPTY = "test_masked_attention", "test_masked_attention_empty"
PART2 = {"test_train_epoch", "test_train_epoch_mode", "test_train_epoch_loss"}
PART4 = {"test_trained_model_learns", "test_trained_model"}
SUBMISSIONS = {
    "a1_softmax_axis": ("a1_attention", [("attention_weights", "return logits.softmax(dim=-1)",
                                          "return logits.softmax(dim=-2)")], {W1, W1G}),
    "a1_softmax_heads_axis": ("a1_attention", [("attention_weights", "return logits.softmax(dim=-1)",
                                                "return logits.softmax(dim=1)")], {W1, W1G}),
    "a1_scale_by_d_v": ("a1_attention", [("attention", "return attention_weights(q, k) @ v",
                                          "logits = q @ k.transpose(-2, -1) / math.sqrt(v.shape[-1])\n"
                                          "    return logits.softmax(dim=-1) @ v")], {AT, ATG}),
    "a1_mask_on_queries": ("a1_attention", [("masked_attention", 'logits = logits.masked_fill(~mask, float("-inf"))',
                                             'logits = logits.masked_fill(~mask.mT, float("-inf"))')],
                           {MASK, MASK_EMPTY}),
    # Slips at an edge cost the general cell only: a hard-coded d_k is right for the d_k of the first cell, a naive
    # softmax for its small logits, a finite fill for every query that keeps a key.
    "a1_hardcoded_dk": ("a1_attention", [("attention_weights", "d_k = q.shape[-1]", "d_k = 8")], {W1G}),
    "a1_naive_softmax": ("a1_attention", [("attention_weights", "return logits.softmax(dim=-1)",
                                           "return logits.exp() / logits.exp().sum(dim=-1, keepdim=True)")], {W1G}),
    "a1_finite_fill": ("a1_attention", [("masked_attention", 'logits = logits.masked_fill(~mask, float("-inf"))',
                                         "logits = logits.masked_fill(~mask, -1e9)")], {MASK_EMPTY}),
    "a1_transposed_weights": ("a1_attention", [("attention", "return attention_weights(q, k) @ v",
                                                "return attention_weights(q, k).transpose(-2, -1) @ v")], {AT, ATG}),
    "a1_mask_ignored": ("a1_attention", [("masked_attention", 'logits = logits.masked_fill(~mask, float("-inf"))',
                                          "logits = logits")], {MASK, MASK_EMPTY}),
    "a1_qk_swapped": ("a1_attention", [("single_head", "q, k, v = x @ w_q, x @ w_k, x @ w_v",
                                        "q, k, v = x @ w_k, x @ w_q, x @ w_v")],
                      {"test_single_head", "test_single_head_general"}),
    "a1_head_width": ("a1_attention", [("split_heads", "x = x.reshape(batch, tokens, num_heads, dim // num_heads)",
                                        "x = x.reshape(batch, tokens, dim // num_heads, num_heads)")],
                      {"test_split_heads", "test_split_heads_general"}),
    "a1_interleaved_merge": ("a1_attention", [("merge_heads", "return x.transpose(1, 2).reshape(",
                                               "return x.permute(0, 2, 3, 1).reshape(")],
                             {"test_merge_heads", "test_merge_heads_general"}),
    "a1_sqrt_D_in_module": ("a1_attention", [("multi_head_attention",
                                              "return self.proj(merge_heads(attention(q, k, v)))",
                                              "logits = q @ k.transpose(-2, -1) / math.sqrt(x.shape[-1])\n"
                                              "        return self.proj(merge_heads(logits.softmax(dim=-1) @ v))")],
                            {"test_multi_head_attention", "test_multi_head_attention_general"}),
    "a2_column_major": ("a2_patches_to_vit", [("patchify", "x = x.permute(0, 2, 4, 3, 5, 1)",
                                               "x = x.permute(0, 4, 2, 3, 5, 1)")],
                        {"test_patchify", "test_patchify_general"}),
    "a2_unfold_kernel_order": ("a2_patches_to_vit", [("unfold_embedding", "weight = conv.weight.flatten(1)",
                                                      "weight = conv.weight.permute(0, 2, 3, 1).flatten(1)")],
                               {"test_unfold_embedding", "test_unfold_embedding_overlapping"}),
    # Windows cut at the kernel's stride: right for patches (kernel = stride), wrong for overlapping windows.
    "a2_stride_is_kernel": ("a2_patches_to_vit", [("unfold_embedding", "stride=conv.stride)",
                                                   "stride=conv.kernel_size)")], {"test_unfold_embedding_overlapping"}),
    "a2_no_bias": ("a2_patches_to_vit", [("patch_embedding", "return self.proj(patchify(images, self.patch_size))",
                                          "return patchify(images, self.patch_size) @ self.proj.weight.T")],
                   {"test_patch_embedding", "test_patch_embedding_general"}),
    # The block is graded per branch, then whole: norm1 before the MLP leaves the attention branch right.
    "a2_norm1_twice": ("a2_patches_to_vit", [("encoder_block", "x = x + self.mlp(self.norm2(x))",
                                              "x = x + self.mlp(self.norm1(x))")],
                       {"test_encoder_block_mlp", "test_encoder_block"}),
    "a2_no_attention_residual": ("a2_patches_to_vit", [("encoder_block", "x = x + attended  # tokens exchange",
                                                        "x = attended  # tokens exchange")],
                                 {"test_encoder_block_attention", "test_encoder_block_mlp", "test_encoder_block"}),
    # Part 5 is graded in three cells (forward 3, shape 1, [CLS] path 2 points). The [CLS] cell checks
    # head(norm(blocks(cls_token + pos_embed[:, 0]))) at depth >= 1, so a mistake on that path loses it as well
    # as the forward one (1 of 6 points left); a forward that never runs the blocks, or normalises before
    # them, is no exception (with the [CLS] cell at depth 0 they once kept 3 of 6 points).
    "a2_no_positions": ("a2_patches_to_vit", [("vit_forward", "x = torch.cat([cls, x], dim=1) + self.pos_embed",
                                               "x = torch.cat([cls, x], dim=1)")],
                        {"test_vit_forward", "test_vit_cls_token"}),
    "a2_no_blocks": ("a2_patches_to_vit", [("vit_forward",
                                            "for block in self.blocks:\n            x, _ = block(x)\n        ", "")],
                     {"test_vit_forward", "test_vit_cls_token"}),
    "a2_norm_before_blocks": ("a2_patches_to_vit", [("vit_forward", "x = torch.cat([cls, x], dim=1) + self.pos_embed",
                                                     "x = self.norm(torch.cat([cls, x], dim=1) + self.pos_embed)"),
                                                    ("vit_forward", "        x = self.norm(x)\n", "")],
                              {"test_vit_forward", "test_vit_cls_token"}),
    # Positions added before [CLS] is prepended: N tokens against N + 1 rows, a RuntimeError in every cell.
    "a2_positions_before_cls": ("a2_patches_to_vit", [("vit_forward",
                                                       "x = torch.cat([cls, x], dim=1) + self.pos_embed",
                                                       "x = torch.cat([cls, x + self.pos_embed], dim=1)")],
                                {"test_vit_forward", "test_vit_shape", "test_vit_cls_token"}),
    # Classifying every token instead of [CLS]: logits of the wrong shape, so all three cells of part 5.
    "a2_every_token": ("a2_patches_to_vit", [("vit_forward", "return self.head(x[:, 0])  # classify from [CLS]",
                                              "return self.head(x)")],
                       {"test_vit_forward", "test_vit_shape", "test_vit_cls_token"}),
    # A3 trains for about 15 s per submission, so mistakes in different parts share a submission. Slips: the model
    # left in eval mode costs Part 2's training-mode cell and, in evaluate, Part 3's second cell; the run still
    # learns (the model has no dropout), so Part 4 keeps its points (85 % is asked only of a right train_epoch).
    "a3_no_train_no_eval_mode": ("a3_training", [("train_epoch", "model.train()", "pass  # model.train() forgotten"),
                                                 ("evaluate", "model.eval()", "pass  # model.eval() forgotten")],
                                 {"test_train_epoch_mode", "test_evaluate_exact"}),
    # Without zero_grad the run diverges and does not learn: Part 2, and Part 4, which asks of any train_epoch
    # that the run learns (Part 6 is tested on a model of the grader's own, not on the run).
    "a3_no_zero_grad": ("a3_training", [("train_epoch", "optimizer.zero_grad()",
                                         "pass  # optimizer.zero_grad() forgotten")], PART2 | PART4),
    # optimizer.step() before loss.backward(): every step finds no gradients, the model never learns (Part 2 and
    # Part 4); and an evaluate that ignores its split and scores the training images (both cells of Part 3).
    "a3_step_before_backward_evaluate_on_train": (
        "a3_training", [("train_epoch", "loss.backward()\n        optimizer.step()",
                         "optimizer.step()\n        loss.backward()"),
                        ("evaluate", "loader(split, batch_size=500)", 'loader("train", batch_size=500)')],
        PART2 | PART4 | {"test_evaluate", "test_evaluate_exact"}),
    # Probabilities handed to cross_entropy: the run learns slowly (about 70 %), so only Part 2 loses points.
    "a3_softmax_before_loss": ("a3_training", [("train_epoch", "loss = F.cross_entropy(model(images), labels)",
                                                "loss = F.cross_entropy(model(images).softmax(-1), labels)")],
                               PART2),
}
ASSIGNMENTS = sorted({assignment for assignment, _, _ in SUBMISSIONS.values()})


def _load_tool():
    spec = importlib.util.spec_from_file_location("make_assignments", ROOT / "tools" / "make_assignments.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _grade_id(cell) -> str | None:
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def _model_solution(source_cell) -> str:
    """The instructor's solution cell without the BEGIN/END SOLUTION lines: what a good student writes."""
    return "\n".join(line for line in source_cell.source.splitlines() if not re.search(r"(BEGIN|END) SOLUTION", line))


def _submission(release: Path, source: Path, edits: list[tuple[str, str, str]]):
    """The student version with every solution filled in, and the planted mistakes put in."""
    solutions = {_grade_id(c): c for c in nbformat.read(source, as_version=4).cells
                 if c.metadata.get("nbgrader", {}).get("solution")}
    nb = nbformat.read(release, as_version=4)
    for cell in nb.cells:
        if _grade_id(cell) in solutions:
            cell.source = _model_solution(solutions[_grade_id(cell)])
            for cell_id, old, new in edits:
                if _grade_id(cell) == cell_id:
                    assert cell.source.count(old) == 1, f"{old!r} must occur once in the solution of {cell_id}"
                    cell.source = cell.source.replace(old, new)
    return nb


def _env() -> dict[str, str]:
    """This environment, with its bin folder on PATH (nbgrader runs `alembic`) and this checkout's vitedu."""
    def prepend(first: str, rest: str | None) -> str:
        return os.pathsep.join(filter(None, [first, rest]))

    return {**os.environ, "PATH": prepend(str(Path(sys.executable).parent), os.environ.get("PATH")),
            "PYTHONPATH": prepend(str(ROOT), os.environ.get("PYTHONPATH"))}


def _nbgrader(course: Path, *args: str) -> None:
    env = _env()
    result = subprocess.run([sys.executable, "-m", "nbgrader", *args, "--force"], cwd=course, env=env,
                            capture_output=True, text=True, timeout=900)
    log = f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    assert result.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{log}"


@pytest.fixture(scope="module")
def scores(tmp_path_factory) -> dict[str, dict[str, tuple[float, float]]]:
    """student -> {graded cell: (score, max score)}, from nbgrader's gradebook after autograde."""
    from nbgrader.api import Gradebook

    course = tmp_path_factory.mktemp("course")
    (course / "nbgrader_config.py").write_text(
        "c = get_config()\n"
        "c.CourseDirectory.course_id = 'vitedu'\n"
        "c.Execute.timeout = 600\n"  # A3 trains for about a minute in one cell
    )
    _load_tool().course_copy(course, seed=0)  # the instructor copy, as `make assignments COURSE_DIR=...` writes it
    for assignment in ASSIGNMENTS:
        _nbgrader(course, "generate_assignment", assignment)
        release = course / "release" / assignment / f"{assignment}.ipynb"
        for student, (name, edits, _) in SUBMISSIONS.items():
            if name == assignment:
                target = course / "submitted" / student / assignment / f"{assignment}.ipynb"
                target.parent.mkdir(parents=True)
                nbformat.write(_submission(release, SOURCE / name / f"{name}.ipynb", edits), target)
        _nbgrader(course, "autograde", assignment)
    result, path = {}, os.environ.get("PATH")
    os.environ["PATH"] = _env()["PATH"]  # opening the gradebook runs `alembic` too
    try:
        gradebook = Gradebook(f"sqlite:///{course / 'gradebook.db'}")
    finally:
        os.environ["PATH"] = path if path is not None else os.defpath
    with gradebook:
        for student, (assignment, _, _) in SUBMISSIONS.items():
            notebook = gradebook.find_submission_notebook(assignment, assignment, student)
            result[student] = {grade.name: (grade.score, grade.max_score) for grade in notebook.grades
                               if grade.cell.cell_type == "code" and not grade.needs_manual_grade
                               and grade.name.startswith("test_")}
    for student, parts in result.items():  # the table of the report (shown with pytest -s)
        print(f"{student:24s}", "  ".join(f"{name[5:]} {score:g}/{top:g}" for name, (score, top) in parts.items()))
    return result


@pytest.mark.slow
@pytest.mark.parametrize("student", SUBMISSIONS)
def test_a_planted_mistake_costs_only_the_points_of_its_part(student, scores):
    assignment, _, losing = SUBMISSIONS[student]
    got = scores[student]
    source = nbformat.read(SOURCE / assignment / f"{assignment}.ipynb", as_version=4)
    tests = {_grade_id(c) for c in source.cells if _grade_id(c) and _grade_id(c).startswith("test_")}
    assert set(got) == tests, f"autograde scored {sorted(got)}, the source has {sorted(tests)}"
    lost = {name for name, (score, top) in got.items() if score < top}
    assert lost == losing, f"{student}: expected to lose exactly {sorted(losing)}, lost {sorted(lost)}: {got}"
    for name in losing:
        assert got[name][0] == 0, f"{student}: {name} should score 0, got {got[name]}"


@pytest.mark.slow
def test_the_planted_mistakes_cover_every_part_of_a1_and_a2(scores):
    """Each autograded part of A1 and A2 has a mistake planted in it (so no-cascade is shown for every one)."""
    for assignment in ("a1_attention", "a2_patches_to_vit"):
        source = nbformat.read(SOURCE / assignment / f"{assignment}.ipynb", as_version=4)
        tests = {_grade_id(c) for c in source.cells if _grade_id(c) and _grade_id(c).startswith("test_")}
        planted = set().union(*(losing for name, *_, losing in SUBMISSIONS.values() if name == assignment))
        assert tests == planted, f"no planted mistake in {sorted(tests - planted)}"
