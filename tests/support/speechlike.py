"""A speech-like test signal, written to and read back from a real WAV file (standard library ``wave``).

Voiced syllables: a glottal pulse train (f0 around 120 Hz with jitter and a
slow glide) shaped by three formant resonances that move from syllable to
syllable, under a 4-5 Hz syllable envelope, separated by pauses of room noise.
It is not speech, but it has what a voice activity detector keys on (harmonic
energy in the speech band, syllabic modulation, pauses), so silero-vad's
probabilities rise and fall on it.  ``espeak_wav`` uses espeak-ng when it is
installed (it is never required).
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import wave

import numpy as np

RATE = 16000


def speechlike(seconds: float = 4.0, rate: int = RATE, seed: int = 0) -> np.ndarray:
    """float32 samples in [-1, 1]: syllables and pauses."""
    rng = np.random.default_rng(seed)
    n = int(seconds * rate)
    t = np.arange(n) / rate
    f0 = 120 + 15 * np.sin(2 * np.pi * 0.7 * t) + rng.normal(0, 1.5, n).cumsum() / np.sqrt(np.arange(1, n + 1))
    phase = np.cumsum(f0 / rate)
    pulses = np.diff(np.floor(phase), prepend=0.0)  # one impulse per glottal period
    # formants by FFT shaping, per 0.25 s block so they move like vowels do
    out = np.zeros(n)
    block = rate // 4
    vowels = [(700, 1200, 2600), (300, 2300, 3000), (500, 900, 2400), (400, 1900, 2600)]
    for b, start in enumerate(range(0, n, block)):
        seg = pulses[start : start + block]
        spec = np.fft.rfft(seg, n=2 * block)
        freqs = np.fft.rfftfreq(2 * block, 1 / rate)
        gain = np.zeros_like(freqs)
        for f, bw in zip(vowels[b % len(vowels)], (90, 110, 160)):
            gain += 1.0 / (1.0 + ((freqs - f) / bw) ** 2)
        shaped = np.fft.irfft(spec * gain)[: len(seg)]
        out[start : start + len(seg)] += shaped
    envelope = np.clip(np.sin(2 * np.pi * 4.5 * t), 0, None) ** 0.6  # syllables
    phrase = ((t % 1.6) < 1.1).astype(float)  # 1.1 s of syllables, 0.5 s pause
    voiced = out * envelope * phrase
    voiced /= np.max(np.abs(voiced)) + 1e-12
    noise = 0.003 * rng.standard_normal(n)
    return (0.6 * voiced + noise).astype(np.float32)


def write_wav(path: pathlib.Path, samples: np.ndarray, rate: int = RATE) -> pathlib.Path:
    pcm = np.clip(np.round(samples * 32768), -32768, 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm.tobytes())
    return path


def read_wav(path: pathlib.Path) -> tuple[np.ndarray, int]:
    """Mono 16-bit PCM as float32 in [-1, 1], and the rate."""
    with wave.open(str(path), "rb") as w:
        if w.getsampwidth() != 2:
            raise ValueError(f"{path}: {8 * w.getsampwidth()}-bit samples; 16-bit expected")
        rate, channels = w.getframerate(), w.getnchannels()
        data = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32768.0
    return data.reshape(-1, channels).mean(axis=1).astype(np.float32), rate


def espeak_wav(path: pathlib.Path, text: str = "voice activity detection keeps its state across calls") -> pathlib.Path | None:
    """A WAV spoken by espeak-ng at 16 kHz when espeak-ng is installed, else None."""
    exe = shutil.which("espeak-ng")
    if exe is None:
        return None
    raw = path.with_suffix(".espeak.wav")
    try:
        subprocess.run([exe, "-w", str(raw), text], check=True, capture_output=True, timeout=30)
        samples, rate = read_wav(raw)
    except (OSError, subprocess.SubprocessError, ValueError, wave.Error):
        return None
    if rate != RATE:  # espeak-ng writes 22,050 Hz: resample linearly (fine for a VAD test)
        t = np.arange(int(len(samples) * RATE / rate)) / RATE
        samples = np.interp(t, np.arange(len(samples)) / rate, samples).astype(np.float32)
    return write_wav(path, samples)


if __name__ == "__main__":  # python tests/support/speechlike.py speech.wav [seconds]: the stream of docs/streaming.md
    import sys

    target = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "speech.wav")
    write_wav(target, speechlike(float(sys.argv[2]) if len(sys.argv) > 2 else 20.0))
    print(target)
