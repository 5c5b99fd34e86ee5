// Accessory files are read with HomeModel's one strict reader; its complaints become
// `SimulatorError`s that name the file and the key path.
import HomeModel
import Yams

typealias FileReader = StrictReader<Node, SimulatorError>

extension SimulatorError {
    static func reading(_ file: String) -> FileReader.MakeFailure {
        { code, key, message in SimulatorError(file: file, key: key, code: code, message: message) }
    }
}
