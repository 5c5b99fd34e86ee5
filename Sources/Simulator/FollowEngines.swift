import HomeModel

// The engines that make a device's current state follow its target, beside the garage door and
// the lock: positions (window covering, door, window) travel; security systems, valves, fans,
// purifiers, heater-coolers and humidifiers settle after a delay. Without them a controller's
// accepted `set` would leave the current state where it was, and the device would look unmoved.

// MARK: - Position

/// Current-position walks toward target-position at `travelTime` seconds for a full 0…100 travel,
/// with position-state increasing/decreasing while it moves and stopped when it arrives. A new
/// target half-way turns it from where it is; hold-position stops it there. Tilt angles follow
/// their targets at once (a slat turns in a moment).
struct PositionEngine: BehaviourEngine {
    enum State { static let decreasing = 0.0, increasing = 1.0, stopped = 2.0 }

    let travelTime: Double
    /// The position the movement started from, its goal and the time it started.
    var motion: (from: Double, goal: Double, since: Double)?

    init(travelTime: Double) { self.travelTime = max(0, travelTime) }

    /// Where the movement has got to: linear in time, never past the goal.
    func position(at now: Double, _ ctx: BehaviourContext) -> Double {
        guard let motion else { return ctx.number(HAPType.currentPosition) ?? 0 }
        guard travelTime > 0 else { return motion.goal }
        let moved = (now - motion.since) / travelTime * 100
        return motion.goal > motion.from
            ? min(motion.goal, motion.from + moved) : max(motion.goal, motion.from - moved)
    }

    mutating func didWrite(_ type: String, _ ctx: inout BehaviourContext) {
        switch type {
        case HAPType.targetPosition:
            guard let goal = ctx.number(HAPType.targetPosition) else { return }
            move(toward: goal, &ctx)
        case HAPType.holdPosition:
            // Write-only: the write itself is the request (its value is not kept to read).
            guard motion != nil else { return }
            let here = position(at: ctx.now, ctx)
            motion = nil
            ctx.cancel()
            ctx.setNumber(HAPType.currentPosition, here)
            ctx.setNumber(HAPType.targetPosition, here)
            ctx.setNumber(HAPType.positionState, State.stopped)
        default:
            for (target, current) in HAPType.tiltPairs where type == target {
                if let angle = ctx.number(target) { ctx.setNumber(current, angle) }
            }
        }
    }

    mutating func move(toward goal: Double, _ ctx: inout BehaviourContext) {
        let here = position(at: ctx.now, ctx)
        motion = nil
        ctx.cancel()
        ctx.setNumber(HAPType.currentPosition, here)
        if here == goal || travelTime == 0 {
            ctx.setNumber(HAPType.currentPosition, goal)
            ctx.setNumber(HAPType.positionState, State.stopped)
            return
        }
        motion = (here, goal, ctx.now)
        ctx.setNumber(HAPType.positionState, goal > here ? State.increasing : State.decreasing)
        ctx.schedule(after: abs(goal - here) / 100 * travelTime)
    }

    mutating func fire(tag: Int, _ ctx: inout BehaviourContext) {
        guard let motion else { return }
        self.motion = nil
        ctx.setNumber(HAPType.currentPosition, motion.goal)
        ctx.setNumber(HAPType.positionState, State.stopped)
    }
}

// MARK: - Settling states

/// How a service's current state follows what was written, `delay` seconds after the last write.
public enum SettleRule: Sendable, Hashable {
    /// security-system-current-state takes the target (stay, away, night, disarmed).
    case securitySystem
    /// in-use follows active (valve).
    case valve
    /// current-fan-state / current-air-purifier-state: blowing or purifying while active, else
    /// inactive.
    case activeDevice(current: String)
    /// current-heater-cooler-state: inactive when off, else heating, cooling or idle (auto).
    case heaterCooler
    /// current-humidifier-dehumidifier-state: inactive when off, else humidifying,
    /// dehumidifying or idle (either).
    case humidifier

    /// The characteristics whose writes start the delay.
    var sources: [String] {
        switch self {
        case .securitySystem: [HAPType.securitySystemTarget]
        case .valve, .activeDevice: [HAPType.active]
        case .heaterCooler: [HAPType.active, HAPType.targetHeaterCooler]
        case .humidifier: [HAPType.active, HAPType.targetHumidifier]
        }
    }

    func apply(_ ctx: inout BehaviourContext) {
        let active = ctx.number(HAPType.active).map { $0 != 0 }
        switch self {
        case .securitySystem:
            if let target = ctx.number(HAPType.securitySystemTarget) {
                ctx.setNumber(HAPType.securitySystemCurrent, target)
            }
        case .valve:
            if let active { ctx.setNumber(HAPType.inUse, active ? 1 : 0) }
        case .activeDevice(let current):
            // 2 is blowing-air / purifying-air, 0 inactive.
            if let active { ctx.setNumber(current, active ? 2 : 0) }
        case .heaterCooler:
            guard let active, let mode = ctx.number(HAPType.targetHeaterCooler) else { return }
            // Target 0 auto, 1 heat, 2 cool → current 1 idle, 2 heating, 3 cooling; 0 inactive.
            ctx.setNumber(HAPType.currentHeaterCooler, active ? 1 + min(2, max(0, mode)) : 0)
        case .humidifier:
            guard let active, let mode = ctx.number(HAPType.targetHumidifier) else { return }
            // Target 0 either, 1 humidifier, 2 dehumidifier → current 1 idle, 2, 3; 0 inactive.
            ctx.setNumber(HAPType.currentHumidifier, active ? 1 + min(2, max(0, mode)) : 0)
        }
    }
}

struct SettleEngine: BehaviourEngine {
    let rule: SettleRule
    let delay: Double

    mutating func didWrite(_ type: String, _ ctx: inout BehaviourContext) {
        guard rule.sources.contains(type) else { return }
        ctx.cancel()
        if delay > 0 { ctx.schedule(after: delay) } else { rule.apply(&ctx) }
    }

    mutating func fire(tag: Int, _ ctx: inout BehaviourContext) { rule.apply(&ctx) }
}
