"""run_main: user faults and Ctrl-C end in one line and an exit code; bugs keep their traceback."""

import errno
import os

import pytest

from episodes.util.cli_errors import (
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    PATH_ERRNOS,
    OutputExistsError,
    UserError,
    interrupt_behind,
    run_main,
    user_faults,
)


def _raising(exc):
    def main(argv):
        raise exc

    return main


def test_user_error_is_one_line(capsys):
    assert run_main(_raising(UserError("--ways 0: expected >= 1"))) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err == "error: --ways 0: expected >= 1\n"


def test_permission_error_names_path_and_what_to_do(capsys):
    exc = PermissionError(errno.EACCES, "Permission denied", "/ro/out")
    assert run_main(_raising(exc)) == EXIT_USAGE
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "/ro/out: Permission denied" in err and "--output" in err


def test_unwritable_output_wrapped_by_a_library_is_one_line(capsys):
    def main(argv):
        try:
            raise PermissionError(errno.EPERM, "Operation not permitted", "/ro/out/x.tfrecords")
        except OSError as exc:
            raise RuntimeError("pipeline failed: [while running 'Write']") from exc

    assert run_main(main) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "/ro/out/x.tfrecords: Operation not permitted" in err
    with pytest.raises(RuntimeError):  # any other wrapped error is a bug: traceback
        run_main(_raising(RuntimeError("boom")))


def test_ctrl_c_prints_the_given_line(capsys):
    code = run_main(_raising(KeyboardInterrupt()), interrupted=lambda: "resume: rerun it")
    assert code == EXIT_INTERRUPTED
    assert capsys.readouterr().err.strip() == "resume: rerun it"


def test_an_interrupt_a_library_wrapped_is_still_an_interrupt(capsys):
    """torch.save stopped mid-write by Ctrl-C or SIGTERM raises RuntimeError("unexpected pos")
    while handling the KeyboardInterrupt: the command still ends in its interrupted line."""

    def main(argv):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 8")  # noqa: B904 (as torch does)

    code = run_main(main, interrupted="interrupted: resume with the same command")
    assert code == EXIT_INTERRUPTED
    assert capsys.readouterr().err.strip() == "interrupted: resume with the same command"
    assert interrupt_behind(RuntimeError("unexpected pos")) is None


def test_a_user_error_subclass_is_one_line_and_a_plain_value_error_a_bug(capsys):
    class PackageError(UserError, ValueError):
        pass

    assert run_main(_raising(PackageError("bad"))) == EXIT_USAGE
    assert capsys.readouterr().err == "error: bad\n"
    for bug in (ValueError("shapes (3,) and (4,) not aligned"), KeyError("ways"), TypeError()):
        with pytest.raises(type(bug)):  # its traceback is kept
            run_main(_raising(bug))
    with pytest.raises(ZeroDivisionError):
        run_main(_raising(ZeroDivisionError()))


@pytest.mark.parametrize("code", sorted(PATH_ERRNOS))
def test_os_errors_of_a_path_are_one_line(capsys, code):
    exc = OSError(code, os.strerror(code), "/data/x")
    assert run_main(_raising(exc)) == EXIT_USAGE
    assert capsys.readouterr().err.startswith(f"error: /data/x: {os.strerror(code)}")


@pytest.mark.parametrize("code", [errno.ECONNREFUSED, errno.EBADF, errno.EINVAL, None])
def test_other_os_errors_keep_their_traceback(code):
    exc = OSError(code, "something else") if code else OSError("no errno")
    with pytest.raises(OSError):
        run_main(_raising(exc))


def test_an_existing_output_is_one_user_error():
    from beam_pipelines import episodes as shards
    from beam_pipelines.conversion import pipeline as conversion
    from episodes.storage import paths as storage_paths

    exc = OutputExistsError("out: exists (pass --overwrite)")
    assert isinstance(exc, UserError) and isinstance(exc, FileExistsError)
    assert conversion.OutputExistsError is shards.OutputExistsError is OutputExistsError
    with pytest.warns(DeprecationWarning, match="OutputPrefixError moved to .*OutputExistsError"):
        assert storage_paths.OutputPrefixError is OutputExistsError


def test_one_corrupt_record_error_and_its_old_name():
    from episodes.records import tfrecord_io
    from episodes.records.record_reader import CorruptRecordError

    assert CorruptRecordError is tfrecord_io.CorruptRecordError
    assert all(issubclass(CorruptRecordError, b) for b in (UserError, ValueError, RuntimeError))
    with pytest.warns(DeprecationWarning, match="RecordCorruptError moved to .*CorruptRecordError"):
        assert tfrecord_io.RecordCorruptError is CorruptRecordError


def test_success_passes_the_code_through():
    assert run_main(lambda argv: 0) == 0
    assert run_main(lambda argv: 3, ["x"]) == 3


def test_user_faults_decorator_prints_user_faults_and_keeps_bugs(capsys):
    class SpecFault(UserError, ValueError):
        pass

    @user_faults
    def main(argv=None):
        """Doc kept."""
        raise argv

    assert main.__name__ == "main" and main.__doc__ == "Doc kept."
    assert main(SpecFault("spec.json: expected a JSON object")) == EXIT_USAGE
    assert capsys.readouterr().err == "error: spec.json: expected a JSON object\n"
    missing = FileNotFoundError(errno.ENOENT, "No such file or directory", "/data/x")
    assert main(missing) == EXIT_USAGE
    assert capsys.readouterr().err == "error: /data/x: No such file or directory (check the path)\n"
    with pytest.raises(ValueError, match="a bug"):  # a plain ValueError keeps its traceback
        main(ValueError("a bug"))
    with pytest.raises(KeyError):
        main(KeyError("k"))
    assert main.__wrapped__ is not None and main.user_fault_types == ()


def test_the_older_typed_form_is_kept_for_the_learners_commands(capsys):
    """`@user_faults(ValueError, ...)` goes when the learners' commands move onto the one root
    (issue 35, the learners' pass); until then it still prints the listed types."""

    @user_faults(ValueError)
    def main(argv=None):
        raise argv

    assert main(ValueError("bad")) == EXIT_USAGE
    assert capsys.readouterr().err == "error: bad\n"
    assert main.user_fault_types == (ValueError,)


def test_several_faults_are_one_line_each_and_survive_a_process_boundary(capsys):
    import pickle

    from episodes.util.cli_errors import UserErrors

    faults = UserErrors(["a.zip: HTTP 404", "b.zip: HTTP 404"])
    assert run_main(_raising(faults)) == EXIT_USAGE
    assert capsys.readouterr().err == "error: a.zip: HTTP 404\nerror: b.zip: HTTP 404\n"
    assert pickle.loads(pickle.dumps(faults)).lines == faults.lines
