"""Media decoding: exact clip windows, frame sampling, audio alignment, damaged and live sources.

Most inputs are small files written here with PyAV whose content encodes time
(frame brightness = frame index, a tone that starts at a known instant), so
the checks are about where things land, not only that decoding ran.
"""

from __future__ import annotations

import http.server
import math
import socketserver
import threading
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from m3agent.errors import MediaError
from m3agent.media import OpenOptions, iter_clips, probe
from m3agent.settings import MediaSettings

av = pytest.importorskip("av")

SIZE = (160, 96)


def level(index: int) -> int:
    """Brightness of synthetic frame ``index``."""
    return 16 + (index * 4) % 224


def write_media(
    path: Path,
    *,
    seconds: float,
    fps: int = 10,
    video: bool = True,
    audio: bool = True,
    rate: int = 44100,
    beep_at: float | None = None,
    frame_times: list[float] | None = None,
    rotation: int = 0,
    size: tuple[int, int] = SIZE,
    vcodec: str = "libx264",
    acodec: str = "pcm_s16le",
    options: dict[str, str] | None = None,
) -> Path:
    """Write a test file: frame i has brightness ``level(i)`` and a white 8x8 block at the top left;
    the audio is silent except a 440 Hz tone from ``beep_at`` (or the whole time when None)."""
    out = av.open(str(path), "w", options=options or {})
    vs = out.add_stream(vcodec, rate=fps) if video else None
    if vs is not None:
        vs.width, vs.height, vs.pix_fmt = size[0], size[1], "yuv420p"
        vs.time_base = vs.codec_context.time_base = Fraction(1, 1000)  # keep variable frame times exact
        if rotation:
            vs.set_display_rotation(rotation)
    as_ = out.add_stream(acodec, rate=rate, layout="mono") if audio else None
    times = frame_times if frame_times is not None else [i / fps for i in range(round(seconds * fps))]
    if vs is not None:
        for i, t in enumerate(times):
            _encode(out, vs, _video_frame(i, t, size))
        _encode(out, vs, None)
    if as_ is not None:
        n = round(seconds * rate)
        tone = (0.3 * np.sin(2 * np.pi * 440 * np.arange(n) / rate)).astype(np.float32)
        if beep_at is not None:
            tone[: round(beep_at * rate)] = 0.0
        for start in range(0, n, 4096):
            chunk = (tone[start : start + 4096] * 32767).astype(np.int16)[None, :]
            frame = av.AudioFrame.from_ndarray(chunk, format="s16", layout="mono")
            frame.sample_rate, frame.pts, frame.time_base = rate, start, Fraction(1, rate)
            _encode(out, as_, frame)
        _encode(out, as_, None)
    out.close()
    return path


def _video_frame(i: int, t: float, size: tuple[int, int]) -> object:
    img = np.full((size[1], size[0], 3), level(i), np.uint8)
    img[:8, :8] = 255
    frame = av.VideoFrame.from_ndarray(img, format="rgb24")
    frame.pts, frame.time_base = round(t * 1000), Fraction(1, 1000)
    return frame


def _encode(out: object, stream: object, frame: object) -> None:
    for packet in stream.encode(frame):  # type: ignore[attr-defined]
        out.mux(packet)  # type: ignore[attr-defined]


def settings(**kw: float) -> MediaSettings:
    base = {"clip_seconds": 2.0, "frame_fps": 2.0, "max_frame_side": 1280}
    base.update(kw)
    return MediaSettings(**base)


def centre_level(image: np.ndarray) -> float:
    h, w = image.shape[:2]
    return float(image[h // 4 : 3 * h // 4, w // 4 : 3 * w // 4].mean())


def onset(audio: np.ndarray) -> int:
    return int(np.argmax(np.abs(audio) > 0.05))


# -- exact windows -------------------------------------------------------------


def test_clips_are_exact_windows_with_aligned_frames_and_audio(tmp_path: Path) -> None:
    src = write_media(tmp_path / "a.mkv", seconds=6.5, beep_at=2.5)
    clips = list(iter_clips(src, settings()))
    assert [(c.clip.index, c.clip.start_s, c.clip.end_s) for c in clips] == [
        (0, 0.0, 2.0),
        (1, 2.0, 4.0),
        (2, 4.0, 6.0),
        (3, 6.0, 6.5),
    ]
    for c in clips:
        assert c.audio is not None and c.audio.dtype == np.float32
        assert len(c.audio) == round(c.clip.duration_s * 16000)
        assert c.audio_rate == 16000 and c.problems == ()
        times = [f.time_s for f in c.frames]
        assert times == sorted(times) and all(c.clip.start_s <= t < c.clip.end_s for t in times)
        for f in c.frames:  # the image shown is the one encoded for that time
            assert f.image.shape == (96, 160, 3) and f.image.dtype == np.uint8
            assert abs(centre_level(f.image) - level(round(f.time_s * 10))) < 3
    assert [len(c.frames) for c in clips] == [4, 4, 4, 1]
    assert np.abs(clips[0].audio).max() < 0.01  # silent before the tone
    assert abs(onset(clips[1].audio) - 8000) <= 16  # tone starts at 2.5 s = 0.5 s into clip 1
    assert np.abs(clips[2].audio).max() > 0.2


def test_short_tail_joins_previous_clip(tmp_path: Path) -> None:
    src = write_media(tmp_path / "tail.mkv", seconds=4.1)
    clips = list(iter_clips(src, settings()))
    assert [(c.clip.start_s, c.clip.end_s) for c in clips] == [(0.0, 2.0), (2.0, 4.1)]
    assert len(clips[-1].audio) == round(2.1 * 16000)


def test_start_clip_resumes_with_identical_content(tmp_path: Path) -> None:
    src = write_media(tmp_path / "r.mp4", seconds=7.0, beep_at=5.3, fps=25)
    full = list(iter_clips(src, settings()))
    resumed = list(iter_clips(src, settings(), start_clip=2))
    assert [c.clip.index for c in resumed] == [2, 3]
    for a, b in zip(full[2:], resumed, strict=True):
        assert (a.clip.start_s, a.clip.end_s) == (b.clip.start_s, b.clip.end_s)
        assert [f.time_s for f in a.frames] == [f.time_s for f in b.frames]
        assert abs(onset(a.audio) - onset(b.audio)) <= 16
    assert abs(onset(resumed[0].audio) - round(1.3 * 16000)) <= 32
    assert list(iter_clips(src, settings(), start_clip=9)) == []


def test_resume_decodes_every_clip_bit_identical_to_an_uninterrupted_pass(media_dir: Path) -> None:
    """44.1 kHz AAC resampled to 16 kHz: a seek used to shift the resampler phase of every later sample."""
    src = media_dir / "video" / "whitehouse_short_hamilton_clip.mp4"
    media = MediaSettings(clip_seconds=2.0, frame_fps=2.0)
    full = list(iter_clips(src, media))
    assert len(full) == 5
    for start in range(1, len(full)):
        resumed = list(iter_clips(src, media, start_clip=start))
        assert [c.clip for c in resumed] == [c.clip for c in full[start:]]
        for a, b in zip(full[start:], resumed, strict=True):
            assert a.audio is not None and b.audio is not None
            assert np.array_equal(a.audio, b.audio), f"clip {a.clip.index} audio differs after resuming at {start}"
            assert [f.time_s for f in a.frames] == [f.time_s for f in b.frames]
            assert all(np.array_equal(x.image, y.image) for x, y in zip(a.frames, b.frames, strict=True))
    assert full[-1].clip.end_s - full[-1].clip.start_s > 2.0, "the 0.02 s tail joined the last clip"
    assert list(iter_clips(src, media, start_clip=len(full))) == [], "a rerun after the last clip finds no tail clip"


# -- stream layouts ------------------------------------------------------------


def test_video_without_audio(tmp_path: Path) -> None:
    src = write_media(tmp_path / "v.mp4", seconds=3.0, audio=False)
    clips = list(iter_clips(src, settings()))
    assert [c.audio for c in clips] == [None, None]
    assert clips[-1].clip.end_s == pytest.approx(3.0, abs=0.01)
    assert all(len(c.frames) >= 2 for c in clips)
    info = probe(src)
    assert (info.has_video, info.has_audio, info.width, info.height) == (True, False, 160, 96)
    assert info.fps == pytest.approx(10.0)


@pytest.mark.parametrize(("name", "codec"), [("a.wav", "pcm_s16le"), ("a.flac", "flac"), ("a.m4a", "aac")])
def test_audio_only_files(tmp_path: Path, name: str, codec: str) -> None:
    src = write_media(tmp_path / name, seconds=5.0, video=False, acodec=codec, rate=48000, beep_at=1.0)
    clips = list(iter_clips(src, settings()))
    assert [c.frames for c in clips] == [(), (), ()]
    assert [(c.width, c.height) for c in clips] == [(0, 0)] * 3
    assert sum(len(c.audio) for c in clips) == pytest.approx(5 * 16000, abs=1100)
    tolerance = 16 if codec != "aac" else 800  # AAC priming may shift by up to one frame
    assert abs(onset(clips[0].audio) - 16000) <= tolerance
    info = probe(src)
    assert (info.has_video, info.has_audio, info.audio_rate) == (False, True, 48000)


def test_variable_frame_rate_samples_by_time(tmp_path: Path) -> None:
    times = [0.0, 0.05, 0.1, 0.9, 1.0, 1.03, 2.6, 2.65, 3.4, 3.95]  # bursts and gaps
    src = write_media(tmp_path / "vfr.mkv", seconds=4.0, frame_times=times, audio=False)
    clips = list(iter_clips(src, settings(frame_fps=4.0)))
    got = [f.time_s for c in clips for f in c.frames]
    assert len(got) == len(set(got)) and all(any(abs(g - t) < 1e-3 for t in times) for g in got)
    # every sample instant k/4 is served by the frame nearest to it inside its clip
    assert got == [0.0, 0.1, 0.9, 1.0, 1.03, 2.6, 2.65, 3.4, 3.95]
    for c in clips:
        for f in c.frames:
            assert abs(centre_level(f.image) - level(times.index(round(f.time_s, 3)))) < 3


def test_rotation_metadata_gives_upright_frames(tmp_path: Path) -> None:
    src = write_media(tmp_path / "rot.mp4", seconds=1.0, rotation=90, audio=False)
    frame = next(iter_clips(src, settings())).frames[0]
    assert frame.image.shape == (160, 96, 3)  # portrait after a quarter turn
    # display rotation 90 = counter-clockwise: the top-left marker moves to the bottom-left
    assert frame.image[-8:, :8].mean() > 240 and frame.image[:8, :8].mean() < 200
    info = probe(src)
    assert (info.width, info.height, info.rotation) == (96, 160, 90)


def test_large_frames_are_downscaled(tmp_path: Path) -> None:
    src = write_media(tmp_path / "big.mp4", seconds=1.0, size=(640, 360), audio=False)
    clip = next(iter_clips(src, settings(max_frame_side=128)))
    assert clip.frames[0].image.shape == (72, 128, 3)
    assert (clip.width, clip.height) == (128, 72)


# -- damaged and unreadable inputs ------------------------------------------------


def test_truncated_file_yields_what_decodes_and_says_so(tmp_path: Path) -> None:
    src = write_media(tmp_path / "t.mkv", seconds=8.0, vcodec="mpeg4", size=(320, 192))
    data = src.read_bytes()
    cut = tmp_path / "half.mkv"
    cut.write_bytes(data[: len(data) // 2])
    clips = list(iter_clips(cut, settings()))
    assert 1 <= len(clips) <= 3
    end = clips[-1].clip.end_s
    assert 2.0 < end < 6.0
    assert any("ends early" in p or "damaged" in p for p in clips[-1].problems)
    assert all(c.problems == () for c in clips[:-1])
    assert all(len(c.audio) == round(c.clip.duration_s * 16000) for c in clips)


def test_truncated_mp4_without_index_is_a_clear_error(tmp_path: Path) -> None:
    src = write_media(tmp_path / "t.mp4", seconds=4.0)
    cut = tmp_path / "half.mp4"
    cut.write_bytes(src.read_bytes()[: src.stat().st_size // 2])
    with pytest.raises(MediaError) as err:
        list(iter_clips(cut, settings()))
    assert "not a readable" in err.value.message and "incomplete" in err.value.hint


def test_truncated_faststart_mp4_keeps_the_decodable_part(tmp_path: Path) -> None:
    src = write_media(tmp_path / "f.mp4", seconds=6.0, options={"movflags": "faststart"}, acodec="aac")
    cut = tmp_path / "half.mp4"
    cut.write_bytes(src.read_bytes()[: src.stat().st_size // 2])
    clips = list(iter_clips(cut, settings()))
    assert clips and clips[-1].clip.end_s < 5.0
    assert any("ends early" in p for p in clips[-1].problems)


@pytest.mark.parametrize(
    ("content", "fragment"),
    [(b"", "empty"), (b"hello, this is not a video\n" * 50, "not a readable")],
)
def test_empty_and_non_media_files(tmp_path: Path, content: bytes, fragment: str) -> None:
    path = tmp_path / "x.mp4"
    path.write_bytes(content)
    with pytest.raises(MediaError, match=fragment):
        list(iter_clips(path, settings()))
    with pytest.raises(MediaError):
        probe(path)


def test_missing_file_and_folder(tmp_path: Path) -> None:
    with pytest.raises(MediaError, match="no such file"):
        list(iter_clips(tmp_path / "nope.mp4", settings()))
    with pytest.raises(MediaError, match="folder"):
        list(iter_clips(tmp_path, settings()))


def test_refused_connection_is_a_media_error() -> None:
    with socketserver.TCPServer(("127.0.0.1", 0), socketserver.BaseRequestHandler) as server:
        port = server.server_address[1]
    start = time.monotonic()  # the port is closed again now
    for url in (f"http://127.0.0.1:{port}/live.ts", f"rtsp://127.0.0.1:{port}/cam"):
        with pytest.raises(MediaError) as err:
            list(iter_clips(url, settings(), options=OpenOptions(timeout_s=3)))
        assert "cannot connect" in err.value.message and "server is running" in err.value.hint
    assert time.monotonic() - start < 5


# -- live and growing sources --------------------------------------------------------


def _ts_file(tmp_path: Path, seconds: float) -> Path:
    return write_media(tmp_path / "s.ts", seconds=seconds, acodec="mp2", rate=48000)


def test_stalled_http_stream_ends_with_a_problem(tmp_path: Path) -> None:
    data = _ts_file(tmp_path, 8.0).read_bytes()
    release = threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "video/mp2t")
            self.end_headers()
            self.wfile.write(data[: int(len(data) * 0.6)])
            self.wfile.flush()
            release.wait(20)  # then stall: the connection stays open, nothing more arrives

        def log_message(self, *args: object) -> None:
            pass

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/live.ts"
        start = time.monotonic()
        clips = list(iter_clips(url, settings(), options=OpenOptions(timeout_s=1.5)))
        assert time.monotonic() - start < 10
    finally:
        release.set()
        server.shutdown()
        server.server_close()
    assert len(clips) >= 2 and clips[0].clip.start_s == 0.0
    assert clips[-1].clip.end_s < 7.0
    assert any("stalled" in p for p in clips[-1].problems)
    assert all(len(c.audio) == round(c.clip.duration_s * 16000) for c in clips)


def test_growing_file_is_followed_and_streamed(tmp_path: Path) -> None:
    data = _ts_file(tmp_path, 7.0).read_bytes()
    growing = tmp_path / "rec.ts"
    growing.write_bytes(b"")
    done = threading.Event()

    def writer() -> None:
        step = len(data) // 10
        with growing.open("ab") as f:
            for i in range(0, len(data), step):
                f.write(data[i : i + step])
                f.flush()
                time.sleep(0.3)
        done.set()

    threading.Thread(target=writer, daemon=True).start()
    arrivals = []
    clips = []
    for clip in iter_clips(growing, settings(), options=OpenOptions(timeout_s=1.5, follow=True)):
        arrivals.append(done.is_set())
        clips.append(clip)
    assert not arrivals[0]  # the first clip came while the file was still being written
    assert [c.clip.index for c in clips] == [0, 1, 2, 3]
    assert clips[-1].clip.end_s == pytest.approx(7.0, abs=0.15)
    assert all(c.problems == () for c in clips)


def test_webcam_if_present() -> None:
    if not Path("/dev/video0").exists():
        pytest.skip("no capture device at /dev/video0")
    clip = next(iter_clips("/dev/video0", settings(clip_seconds=1.0), options=OpenOptions(timeout_s=5)))
    assert clip.frames and clip.frames[0].image.ndim == 3


# -- real media ----------------------------------------------------------------------


@pytest.mark.media
def test_real_video_clips_cover_the_whole_file(media_dir: Path) -> None:
    src = media_dir / "video" / "whitehouse_short_hamilton_clip.mp4"
    info = probe(src)
    assert (info.width, info.height, info.has_audio) == (640, 360, True)
    clips = list(iter_clips(src, settings(clip_seconds=4.0, frame_fps=1.0)))
    assert [c.clip.start_s for c in clips] == [0.0, 4.0, 8.0]
    assert clips[-1].clip.end_s == pytest.approx(info.duration_s, abs=0.05)
    total = sum(len(c.audio) for c in clips)
    assert total == round(clips[-1].clip.end_s * 16000)
    frames = [f for c in clips for f in c.frames]
    assert len(frames) == 11 and frames[0].image.shape == (360, 640, 3)  # samples at 0, 1, ..., 10 s
    assert all(np.abs(c.audio).max() > 0.05 for c in clips)  # he raps all the way through


@pytest.mark.media
def test_real_long_video_streams_in_order(media_dir: Path) -> None:
    src = media_dir / "video" / "long_multi_person" / "videollava_sample_demo_16_snow.mp4"
    starts = [c.clip.start_s for c in iter_clips(src, settings(clip_seconds=30.0, frame_fps=0.5))]
    assert starts == [0.0, 30.0, 60.0, 90.0, 120.0, 150.0] or starts == [0.0, 30.0, 60.0, 90.0, 120.0]


def test_audio_track_helper_roundtrip() -> None:
    from m3agent.media.audio import AudioTrack

    track = AudioTrack(16000, 0.0, 0.0)
    assert track.end_s == 0.0
    out = track.cut(0.0, 0.5)
    assert len(out) == 8000 and not out.any()
    assert math.isclose(track.end_s, 0.0)
